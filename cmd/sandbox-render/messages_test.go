package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFindingMessages: every finding is one line a user can act on, naming the file, its own
// document, the object and the field, with names quoted when they hold anything but a plain name
// and values cut to 200 characters.
func TestFindingMessages(t *testing.T) {
	const (
		template = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata:\n  name: python\n  namespace: ns\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: python\n        image: python:3.12\n"
		claim    = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata:\n  name: alice\n  namespace: ns\nspec:\n  warmPoolRef:\n    name: python\n"
		pool     = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata:\n  name: python\n  namespace: ns\nspec:\n  replicas: 9000\n  sandboxTemplateRef:\n    name: python\n"
		cm       = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
		limit    = "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  maxPoolMembers: 100\n"
	)
	sandboxNamed := func(name string) string {
		return "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: " + name + "\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: c, image: i}]\n"
	}
	long := strings.Repeat("a", 10485760)
	cases := map[string]struct {
		reason string
		files  map[string]string
		// want is standard error, {dir} standing for the directory of the files.
		want string
	}{
		"NewlineInName": {
			reason: "a newline in a name split the finding line in two",
			files:  map[string]string{"sb.yaml": sandboxNamed(`"a\nb: evil"`)},
			want: `{dir}/sb.yaml: document 1 (line 1): error: Sandbox "a\nb: evil": metadata.name: Invalid value: "a\nb: evil": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"LongName": {
			reason: "a 10 MB name gave 20 MB of standard error",
			files:  map[string]string{"sb.yaml": sandboxNamed(long)},
			want: `{dir}/sb.yaml: document 1 (line 1): error: Sandbox "` + long[:200] + `…" (10485760 characters): metadata.name: Invalid value: "` + long[:200] + `…" (10485760 characters): must be no more than 253 characters` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ClaimGivenTwice": {
			reason: `"Sandbox /alice is rendered twice: from SandboxClaim alice and from SandboxClaim alice" named no file, document or field`,
			files:  map[string]string{"a.yaml": template + "---\n" + claim, "b.yaml": claim},
			want: `{dir}/b.yaml: document 1 (line 1): error: SandboxClaim ns/alice: metadata.name: Duplicate value: "alice"` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"EveryDuplicateAtItsOwnLine": {
			reason: "every duplicate of a ConfigMap was reported at the first copy's line",
			files:  map[string]string{"cm.yaml": cm + "---\n" + cm + "---\n" + cm},
			want: `{dir}/cm.yaml: document 2 (line 6): error: ConfigMap c: metadata.name: Duplicate value: "c"` + "\n" +
				`{dir}/cm.yaml: document 3 (line 11): error: ConfigMap c: metadata.name: Duplicate value: "c"` + "\n" +
				"sandbox-render: the input cannot be rendered: 2 problem(s)\n",
		},
		"PoolMembersLimit": {
			reason: "the pool-members limit named no file, document, object or field",
			files:  map[string]string{"t.yaml": template, "pool.yaml": pool, "render.yaml": limit},
			want: `{dir}/pool.yaml: document 1 (line 1): error: SandboxWarmPool ns/python: spec.replicas: Invalid value: 9000: the SandboxWarmPools of this input ask for 9000 members in all, more than the limit of 100 per render; render them in parts, or raise the limit (SandboxRender spec.maxPoolMembers)` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"BadNow": {
			reason: `a bad spec.now said parsing time "x" as "2006-01-02T15:04:05Z07:00", without the field`,
			files:  map[string]string{"sb.yaml": sandboxNamed("s"), "render.yaml": "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  now: x\n"},
			want:   `sandbox-render: {dir}/render.yaml: functionConfig: spec.now: Invalid value: "x": must be an RFC 3339 time such as 2026-06-01T12:00:00Z` + "\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"render", dir}, strings.NewReader(""), &stdout, &stderr); code == exitOK {
				t.Fatalf("%s: exit 0", tc.reason)
			}
			want := strings.ReplaceAll(tc.want, "{dir}", filepath.Clean(dir))
			if diff := cmp.Diff(want, stderr.String()); diff != "" {
				t.Errorf("%s\nstandard error (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
