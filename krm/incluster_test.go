package krm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// TestConfigTravelsWithTheTree: the output carries the functionConfig, as the cluster is to hold
// it, in each namespace of the agent-sandbox objects, so that the controller renders them with
// the options of their preview.
func TestConfigTravelsWithTheTree(t *testing.T) {
	const config = `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: team
  labels:
    team: a
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: sandbox-render
    config.kubernetes.io/local-config: "true"
    internal.config.kubernetes.io/path: render.yaml
    example.com/owner: platform
spec:
  mode: expand
  keepSourceVersions: true
  now: "2026-01-01T00:00:00Z"
  policies:
    networkPolicy:
      dns: cluster-dns`
	inNamespace := func(ns string) string {
		return strings.Replace(sandbox, "namespace: default", "namespace: "+ns, 1)
	}
	copyIn := func(ns string) string {
		return `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  annotations:
    example.com/owner: platform
  labels:
    team: a
  name: team
  namespace: ` + ns + `
spec:
  policies:
    networkPolicy:
      dns: cluster-dns
`
	}
	cases := map[string]struct {
		reason string
		config string
		items  []string
		want   []string // the SandboxRenders of the output
	}{
		"OnePerNamespace": {
			reason: "each namespace with agent-sandbox objects gets its copy, without function-only knobs or function annotations",
			config: config,
			items:  []string{inNamespace("team-a"), strings.Replace(inNamespace("team-b"), "name: agent", "name: other", 1), configMap},
			want:   []string{copyIn("team-a"), copyIn("team-b")},
		},
		"NoFunctionConfig": {
			reason: "without a functionConfig the render used the defaults the controller may not have: no copy claims otherwise",
			items:  []string{sandbox},
		},
		"SourcesNotKept": {
			reason: "keepSources: false is for clusters with no controller, and no CRD for the copy",
			config: "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  keepSources: false",
			items:  []string{sandbox},
		},
		"NothingToGovern": {
			reason: "a tree without agent-sandbox objects needs no config in the cluster",
			config: config,
			items:  []string{configMap},
		},
		"EarlierCopyReplaced": {
			reason: "a base rendered already carries its copy; the config of this render replaces it",
			config: config,
			items:  []string{inNamespace("team-a"), strings.Replace(copyIn("team-a"), "dns: cluster-dns", "dns: public-resolvers", 1)},
			want:   []string{copyIn("team-a")},
		},
		"DefaultName": {
			reason: "a functionConfig with no name (the CLI's --config) is copied as sandbox-render",
			config: "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender",
			items:  []string{sandbox},
			want:   []string{"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: sandbox-render\n  namespace: default\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.config, tc.items...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got []string
			for _, n := range items(t, out) {
				if n.GetKind() == renderconfig.Kind {
					got = append(got, n.MustString())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSandboxRenders of the output (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestConfigCopyBesideAnother: a namespace would hold two SandboxRenders, which the controller
// refuses, so the render refuses it first, naming the item and the field.
func TestConfigCopyBesideAnother(t *testing.T) {
	other := `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: other
  namespace: default`
	out, err := run(t, "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: team", sandbox, other)
	if err == nil {
		t.Fatalf("two SandboxRenders for one namespace did not fail the function:\n%s", out)
	}
	want := []framework.Result{{
		Message:  `SandboxRender default/other: metadata.name: Invalid value: "other": the output would hold two SandboxRenders in this namespace, this one and the functionConfig's copy "team", and the controller renders a namespace with one: remove this one, or name the functionConfig other`,
		Severity: framework.Error,
		ResourceRef: &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: renderconfig.APIVersion, Kind: renderconfig.Kind},
			NameMeta: kyaml.NameMeta{Name: "other", Namespace: "default"}},
		Field: &framework.Field{Path: "metadata.name", CurrentValue: "other"},
	}}
	if diff := cmp.Diff(want, resultsOf(t, out)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}
