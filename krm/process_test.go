package krm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

const sandbox = `
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: agent
  namespace: default
  annotations:
    config.kubernetes.io/path: sandboxes/agent.yaml
    config.kubernetes.io/index: '2'
spec:
  podTemplate:
    spec:
      containers:
      - name: agent
        image: agent:1
  service: true
`

const configMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: untouched # a comment that must survive
  annotations:
    example.com/z: "1"
    config.kubernetes.io/local-config: "true"
data:
  b: "2"
  a: "1"
`

// run processes items with a functionConfig and returns the output ResourceList as text.
func run(t *testing.T, config string, items ...string) (string, error) {
	t.Helper()
	var in bytes.Buffer
	in.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for _, it := range items {
		in.WriteString("- " + strings.ReplaceAll(strings.TrimSpace(it), "\n", "\n  ") + "\n")
	}
	if config != "" {
		in.WriteString("functionConfig:\n  " + strings.ReplaceAll(strings.TrimSpace(config), "\n", "\n  ") + "\n")
	}
	var out bytes.Buffer
	err := Run(&in, &out)
	return out.String(), err
}

// TestProcessorWithKyamlExecute: the same function through kyaml's own framework.Execute (as a
// Go program embedding it would run it) gives the same items as Run.
func TestProcessorWithKyamlExecute(t *testing.T) {
	in := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " +
		strings.ReplaceAll(strings.TrimSpace(sandbox), "\n", "\n  ") + "\n"
	var viaKyaml bytes.Buffer
	if err := framework.Execute(Processor, &kio.ByteReadWriter{Reader: strings.NewReader(in), Writer: &viaKyaml, KeepReaderAnnotations: true}); err != nil {
		t.Fatal(err)
	}
	viaRun, err := run(t, "", sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kinds(items(t, viaRun)), kinds(items(t, viaKyaml.String()))); diff != "" {
		t.Errorf("items (-Run +framework.Execute):\n%s", diff)
	}
}

func items(t *testing.T, rl string) []*kyaml.RNode {
	t.Helper()
	n, err := (&kio.ByteReader{Reader: strings.NewReader(rl), OmitReaderAnnotations: true}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func kinds(nodes []*kyaml.RNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.GetKind()+"/"+n.GetName())
	}
	return out
}

func TestExpand(t *testing.T) {
	cases := map[string]struct {
		reason string
		config string
		want   []string
	}{
		"defaults": {
			reason: "the sources are kept, the children added, the ConfigMap passed through",
			want:   []string{"ConfigMap/untouched", "Pod/agent", "Sandbox/agent", "Service/agent"},
		},
		"drop sources": {
			reason: "keepSources: false emits only what the custom resources render to",
			config: "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  keepSources: false",
			want:   []string{"ConfigMap/untouched", "Pod/agent", "Service/agent"},
		},
		"validate": {
			reason: "validate mode changes nothing",
			config: "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  mode: validate",
			want:   []string{"Sandbox/agent", "ConfigMap/untouched"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.config, sandbox, configMap)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.reason, err, out)
			}
			if diff := cmp.Diff(tc.want, kinds(items(t, out))); diff != "" {
				t.Errorf("%s: items (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPassThroughIsByteIdentical: an item the function does not own comes out exactly as it went
// in, comments, key order and annotations included (local-config too: kustomize drops it later).
func TestPassThroughIsByteIdentical(t *testing.T) {
	out, err := run(t, "", sandbox, configMap)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(strings.ReplaceAll(strings.TrimSpace(configMap), "\n", "\n  "))
	if !strings.Contains(out, want) {
		t.Errorf("the ConfigMap changed; want this text in the output:\n%s\noutput:\n%s", want, out)
	}
}

func TestIdempotent(t *testing.T) {
	first, err := run(t, "", sandbox, configMap)
	if err != nil {
		t.Fatal(err)
	}
	var again []string
	for _, n := range items(t, first) {
		again = append(again, n.MustString())
	}
	second, err := run(t, "", again...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("running the function on its own output changed it (-first +second):\n%s", diff)
	}
}

func TestErrorsBecomeResults(t *testing.T) {
	bad := strings.Replace(sandbox, "  service: true", "  service: true\n  operatingMode: Paused", 1)
	out, err := run(t, "", bad, configMap)
	if err == nil {
		t.Fatal("an invalid Sandbox did not fail the function")
	}
	got := resultsOf(t, out)
	want := []framework.Result{{
		Message:     `Sandbox default/agent: spec.operatingMode: Unsupported value: "Paused": supported values: "Running", "Suspended"`,
		Severity:    framework.Error,
		ResourceRef: &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"}, NameMeta: kyaml.NameMeta{Name: "agent", Namespace: "default"}},
		Field:       &framework.Field{Path: "spec.operatingMode", CurrentValue: "Paused"},
		File:        &framework.File{Path: "sandboxes/agent.yaml", Index: 2},
		Tags:        map[string]string{TagDocument: "3"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// People read document numbers from 1: claims.yaml[1] counted from 0.
	if f := Format(framework.Results{&got[0]}); !strings.HasPrefix(f, "sandboxes/agent.yaml: document 3: error: Sandbox default/agent") {
		t.Errorf("Format = %q, want the file and the 1-based document first", f)
	}
	// The items are still written, unchanged: nothing half-rendered.
	if diff := cmp.Diff([]string{"Sandbox/agent", "ConfigMap/untouched"}, kinds(items(t, out))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

// TestKustomizeAnnotations: the file of a finding is what kustomize tells the function, no more.
// kustomize v5.8.2 annotates every item it sends an exec function with its own ids and the item's
// place in the list (config.kubernetes.io/index, which is no document of a file), and with
// buildMetadata: [originAnnotations] with the item's file relative to the tree it builds (the
// origin), with no document; these are the annotations it sent, read from its standard input.
func TestKustomizeAnnotations(t *testing.T) {
	const item = `
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  annotations:%s
    kustomize.config.k8s.io/id: |
      group: agents.x-k8s.io
      kind: Sandbox
      name: agent
      namespace: default
      version: v1beta1
    config.kubernetes.io/index: '1'
    internal.config.kubernetes.io/index: '1'
    internal.config.kubernetes.io/annotations-migration-resource-id: '1'
    internal.config.kubernetes.io/id: '2'
    config.k8s.io/id: '2'
  name: agent
  namespace: default
spec:
  operatingMode: Paused
  podTemplate:
    spec:
      containers:
      - name: agent
        image: agent:1
`
	cases := map[string]struct {
		reason      string
		annotations string
		want        *framework.File
	}{
		"ListPositionOnly": {
			reason: "without originAnnotations kustomize gives no file: its index is the item's place in the list, not a document",
		},
		"Origin": {
			reason:      "the origin names the file, relative to the tree kustomize builds, and no document",
			annotations: "\n    config.kubernetes.io/origin: |\n      path: sub/agent.yaml",
			want:        &framework.File{Path: "sub/agent.yaml"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, "", fmt.Sprintf(item, tc.annotations))
			if err == nil {
				t.Fatalf("%s: an invalid Sandbox did not fail the function", tc.reason)
			}
			want := []framework.Result{{
				Message:     `Sandbox default/agent: spec.operatingMode: Unsupported value: "Paused": supported values: "Running", "Suspended"`,
				Severity:    framework.Error,
				ResourceRef: &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"}, NameMeta: kyaml.NameMeta{Name: "agent", Namespace: "default"}},
				Field:       &framework.Field{Path: "spec.operatingMode", CurrentValue: "Paused"},
				File:        tc.want,
			}}
			if diff := cmp.Diff(want, resultsOf(t, out)); diff != "" {
				t.Errorf("%s\nresults (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChildOfTwoParents: a child two parents render is a result on the later parent's file,
// document and field naming the child, not a message naming neither.
func TestChildOfTwoParents(t *testing.T) {
	const template = `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: sandbox-agent
  namespace: default
  annotations:
    config.kubernetes.io/path: templates.yaml
    config.kubernetes.io/index: '0'
spec:
  podTemplate:
    spec:
      containers:
      - name: agent
        image: agent:1
`
	withVolume := func(sb, volume string) string {
		return sb + "  volumeClaimTemplates:\n  - metadata:\n      name: " + volume + "\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {requests: {storage: 1Gi}}\n"
	}
	other := strings.NewReplacer("name: agent\n  namespace", "name: b-agent\n  namespace",
		"sandboxes/agent.yaml", "sandboxes/b.yaml", "index: '2'", "index: '1'").Replace(sandbox)
	sandboxRef := func(name string) *kyaml.ResourceIdentifier {
		return &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"}, NameMeta: kyaml.NameMeta{Name: name, Namespace: "default"}}
	}
	cases := map[string]struct {
		reason string
		config string
		items  []string
		want   framework.Result
	}{
		"PVC": {
			reason: "Sandboxes agent and b-agent both render PersistentVolumeClaim a-b-agent, from volume claim templates a-b and a",
			items:  []string{withVolume(sandbox, "a-b"), withVolume(other, "a")},
			want: framework.Result{
				Message:     `Sandbox default/b-agent: spec.volumeClaimTemplates[0].metadata.name: Invalid value: "a": renders PersistentVolumeClaim default/a-b-agent, which Sandbox default/agent renders too; rename one of them`,
				Severity:    framework.Error,
				ResourceRef: sandboxRef("b-agent"),
				Field:       &framework.Field{Path: "spec.volumeClaimTemplates[0].metadata.name", CurrentValue: "a"},
				File:        &framework.File{Path: "sandboxes/b.yaml", Index: 1},
				Tags:        map[string]string{TagDocument: "2"},
			},
		},
		"NetworkPolicy": {
			reason: "template sandbox-agent and, with the standalone pack, Sandbox agent both render NetworkPolicy sandbox-agent-network-policy",
			config: "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  policies:\n    packs:\n      standaloneNetworkPolicy: true",
			items:  []string{template, sandbox},
			want: framework.Result{
				Message:     `Sandbox default/agent: metadata.name: Invalid value: "agent": renders NetworkPolicy default/sandbox-agent-network-policy, which SandboxTemplate default/sandbox-agent renders too; rename one of them`,
				Severity:    framework.Error,
				ResourceRef: sandboxRef("agent"),
				Field:       &framework.Field{Path: "metadata.name", CurrentValue: "agent"},
				File:        &framework.File{Path: "sandboxes/agent.yaml", Index: 2},
				Tags:        map[string]string{TagDocument: "3"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.config, tc.items...)
			if err == nil {
				t.Fatalf("%s: the function did not fail", tc.reason)
			}
			if diff := cmp.Diff([]framework.Result{tc.want}, resultsOf(t, out)); diff != "" {
				t.Errorf("%s\nresults (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGenerator(t *testing.T) {
	config := `apiVersion: render.sandbox-gitops.dev/v1alpha1
kind: SandboxRender
metadata:
  name: gen
spec:
  resources:
  - apiVersion: agents.x-k8s.io/v1beta1
    kind: Sandbox
    metadata:
      name: generated
    spec:
      podTemplate:
        spec:
          containers:
          - name: a
            image: a:1`
	out, err := run(t, config)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff([]string{"SandboxRender/gen", "Pod/generated", "Sandbox/generated"}, kinds(items(t, out))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

// TestConfigErrors: a bad functionConfig is one error result per problem, naming the field in
// the message and in the result's field (the function names no line: the lines of the
// ResourceList are not the file's).
func TestConfigErrors(t *testing.T) {
	cases := map[string]struct {
		config    string
		want      string
		wantField string
	}{
		"unknown field": {"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  keepSource: false",
			"functionConfig: unknown field `spec.keepSource` (did you mean `keepSources`?)", "spec.keepSource"},
		"bad mode":   {"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  mode: fix", `spec.mode: Unsupported value: "fix"`, "spec.mode"},
		"wrong kind": {"apiVersion: v1\nkind: ConfigMap\ndata: {}", "the functionConfig must be render.sandbox-gitops.dev/v1alpha1, kind SandboxRender", ""},
		"bad policy": {"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  policies:\n    networkPolicy:\n      dns: bind",
			`spec.policies.networkPolicy.dns: Unsupported value: "bind"`, "spec.policies.networkPolicy.dns"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.config, sandbox)
			if err == nil {
				t.Fatalf("a bad functionConfig did not fail the function:\n%s", out)
			}
			results := resultsOf(t, out)
			if len(results) != 1 || !strings.Contains(results[0].Message, tc.want) || results[0].Severity != framework.Error {
				t.Fatalf("results = %+v; want one error containing %q", results, tc.want)
			}
			got := ""
			if results[0].Field != nil {
				got = results[0].Field.Path
			}
			if diff := cmp.Diff(tc.wantField, got); diff != "" {
				t.Errorf("the result's field (-want +got):\n%s", diff)
			}
		})
	}
}

func resultsOf(t *testing.T, out string) []framework.Result {
	t.Helper()
	rl, err := kyaml.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := rl.Pipe(kyaml.Lookup("results"))
	if node == nil {
		t.Fatalf("no results in:\n%s", out)
	}
	var got []framework.Result
	if err := node.YNode().Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestNowPreviewsExpiry: with spec.now past a Sandbox's shutdownTime, the function renders what
// the controller leaves (no Pod or Service) and says why in a warning naming the field; without
// spec.now the render does not depend on time.
func TestNowPreviewsExpiry(t *testing.T) {
	expiring := strings.Replace(sandbox, "  service: true", "  service: true\n  shutdownTime: \"2030-01-01T00:00:00Z\"", 1)
	config := "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  now: \"2031-01-01T00:00:00Z\""
	out, err := run(t, config, expiring)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff([]string{"SandboxRender/r", "Sandbox/agent"}, kinds(items(t, out))); diff != "" {
		t.Errorf("items at spec.now (-want +got):\n%s", diff)
	}
	for _, want := range []string{"severity: warning", "path: spec.shutdownTime", "2030-01-01T00:00:00Z has passed at the preview"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the results:\n%s", want, out)
		}
	}
	out, err = run(t, "", expiring)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Pod/agent", "Sandbox/agent", "Service/agent"}, kinds(items(t, out))); diff != "" {
		t.Errorf("items without spec.now (-want +got):\n%s", diff)
	}
}
