package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
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
	// withVolume is a Sandbox or SandboxTemplate given one volume claim template, whose PVC is
	// named <volume>-<Sandbox>.
	withVolume := func(obj, volume string) string {
		return obj + "  volumeClaimTemplates:\n  - metadata:\n      name: " + volume + "\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {requests: {storage: 1Gi}}\n"
	}
	sandboxIn := func(namespace, name string) string {
		return strings.Replace(sandboxNamed(name), "\nspec:", "\n  namespace: "+namespace+"\nspec:", 1)
	}
	templateNamed := func(name string) string {
		return strings.Replace(template, "name: python\n  namespace", "name: "+name+"\n  namespace", 1)
	}
	claimOf := func(name, template string) string {
		return "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata:\n  name: " + name + "\n  namespace: ns\nspec:\n  warmPoolRef:\n    name: shadow-pool-" + template + "\n"
	}
	member := render.PoolMemberName("ns", "python", 0, 0)
	long := strings.Repeat("a", 1<<20)
	cases := map[string]struct {
		reason string
		files  map[string]string
		// want is standard error, {dir} standing for the directory of the files.
		want string
	}{
		"NewlineInName": {
			reason: "a newline in a name split the finding line in two",
			files:  map[string]string{"sb.yaml": sandboxNamed(`"a\nb: evil"`)},
			want: `{dir}/sb.yaml: document 1 (line 4): error: Sandbox "a\nb: evil": metadata.name: Invalid value: "a\nb: evil": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"LongName": {
			reason: "a 10 MB name gave 20 MB of standard error (1 MiB here: over 3 MiB the document is refused unread)",
			files:  map[string]string{"sb.yaml": sandboxNamed(long)},
			want: `{dir}/sb.yaml: document 1 (line 4): error: Sandbox "` + long[:200] + `…" (1048576 characters): metadata.name: Invalid value: "` + long[:200] + `…" (1048576 characters): must be no more than 253 characters` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ClaimGivenTwice": {
			reason: `"Sandbox /alice is rendered twice: from SandboxClaim alice and from SandboxClaim alice" named no file, document or field`,
			files:  map[string]string{"a.yaml": template + "---\n" + claim, "b.yaml": claim},
			want: `{dir}/b.yaml: document 1 (line 4): error: SandboxClaim ns/alice: metadata.name: Duplicate value: "alice"` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"EveryDuplicateAtItsOwnLine": {
			reason: "every duplicate of a ConfigMap was reported at the first copy's line",
			files:  map[string]string{"cm.yaml": cm + "---\n" + cm + "---\n" + cm},
			want: `{dir}/cm.yaml: document 2 (line 9): error: ConfigMap c: metadata.name: Duplicate value: "c"` + "\n" +
				`{dir}/cm.yaml: document 3 (line 14): error: ConfigMap c: metadata.name: Duplicate value: "c"` + "\n" +
				"sandbox-render: the input cannot be rendered: 2 problem(s)\n",
		},
		"PoolMembersLimit": {
			reason: "the pool-members limit named no file, document, object or field",
			files:  map[string]string{"t.yaml": template, "pool.yaml": pool, "render.yaml": limit},
			want: `{dir}/pool.yaml: document 1 (line 7): error: SandboxWarmPool ns/python: spec.replicas: Invalid value: 9000: the SandboxWarmPools of this input ask for 9000 members in all, more than the limit of 100 per render; render them in parts, or raise the limit (SandboxRender spec.maxPoolMembers)` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ChildOfTwoSandboxes": {
			reason: `"PersistentVolumeClaim ns/a-b-c is rendered twice: from Sandbox ns/b-c and from Sandbox ns/c" named no file, document or field`,
			files:  map[string]string{"b-c.yaml": withVolume(sandboxIn("ns", "b-c"), "a"), "c.yaml": cm + "---\n" + withVolume(sandboxIn("ns", "c"), "a-b")},
			want: `{dir}/c.yaml: document 2 (line 17): error: Sandbox ns/c: spec.volumeClaimTemplates[0].metadata.name: Invalid value: "a-b": renders PersistentVolumeClaim ns/a-b-c, which Sandbox ns/b-c renders too; rename one of them` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ChildOfAClaimAndASandbox": {
			reason: "a child of a claim's Sandbox and of a Sandbox was placed nowhere, and the claim's Sandbox has no file",
			files: map[string]string{"t.yaml": withVolume(templateNamed("t"), "data-a"), "claim.yaml": claimOf("b", "t"),
				"sb.yaml": withVolume(sandboxIn("ns", "a-b"), "data")},
			want: `{dir}/sb.yaml: document 1 (line 12): error: Sandbox ns/a-b: spec.volumeClaimTemplates[0].metadata.name: Invalid value: "data": renders PersistentVolumeClaim ns/data-a-b, which Sandbox ns/b (from SandboxClaim ns/b) renders too; rename one of them` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ChildOfTwoClaims": {
			reason: "a child of two claims' Sandboxes is placed on the later claim, which has a file, not on its Sandbox, which has none",
			files: map[string]string{"t.yaml": withVolume(templateNamed("t"), "d") + "---\n" + withVolume(templateNamed("u"), "d-a"),
				"claims.yaml": claimOf("a-b", "t") + "---\n" + claimOf("b", "u")},
			want: `{dir}/claims.yaml: document 2 (line 13): error: SandboxClaim ns/b: metadata.name: Invalid value: "b": its Sandbox ns/b renders PersistentVolumeClaim ns/d-a-b, which Sandbox ns/a-b (from SandboxClaim ns/a-b) renders too; rename one of them` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"ClaimNamedLikeAPoolMember": {
			reason: "a claim rendering the Sandbox a pool renders as a member had no test",
			files: map[string]string{"t.yaml": template, "pool.yaml": strings.Replace(pool, "replicas: 9000", "replicas: 1", 1),
				"claim.yaml": cm + "---\n" + claimOf(member, "python")},
			want: `{dir}/claim.yaml: document 2 (line 9): error: SandboxClaim ns/` + member + `: metadata.name: Invalid value: "` + member + `": renders Sandbox ns/` + member + `, which SandboxWarmPool ns/python renders too; rename one of them` + "\n" +
				"sandbox-render: the input cannot be rendered: 1 problem(s)\n",
		},
		"BadNow": {
			reason: `a bad spec.now said parsing time "x" as "2006-01-02T15:04:05Z07:00", without the field`,
			files:  map[string]string{"sb.yaml": sandboxNamed("s"), "render.yaml": "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: r\nspec:\n  now: x\n"},
			want:   `sandbox-render: {dir}/render.yaml:6: spec.now: Invalid value: "x": must be an RFC 3339 time such as 2026-06-01T12:00:00Z` + "\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			want := strings.ReplaceAll(tc.want, "{dir}", filepath.Clean(dir))
			// validate reports what render does.
			for _, command := range []string{"render", "validate"} {
				var stdout, stderr bytes.Buffer
				if code := run([]string{command, dir}, strings.NewReader(""), &stdout, &stderr); code == cli.ExitOK {
					t.Fatalf("%s: %s: exit 0", tc.reason, command)
				}
				if diff := cmp.Diff(want, stderr.String()); diff != "" {
					t.Errorf("%s\n%s: standard error (-want +got):\n%s", tc.reason, command, diff)
				}
			}
		})
	}
}

// TestChildOfTwoParentsBuild: build places the finding on a child two Sandboxes render as
// render does, on the later Sandbox's file and the field that names the child.
func TestChildOfTwoParentsBuild(t *testing.T) {
	sandbox := func(name, volume string) string {
		return "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: " + name + "\n  namespace: ns\nspec:\n  podTemplate:\n    spec:\n      containers: [{name: c, image: i}]\n" +
			"  volumeClaimTemplates:\n  - metadata:\n      name: " + volume + "\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {requests: {storage: 1Gi}}\n"
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"kustomization.yaml": "resources:\n- b-c.yaml\n- c.yaml\ntransformers:\n- render.yaml\n",
		"render.yaml":        strings.Replace(restrictedConfig, "restricted: true", "restricted: false", 1),
		"b-c.yaml":           sandbox("b-c", "a"),
		"c.yaml":             sandbox("c", "a-b"),
	})
	var stdout, stderr bytes.Buffer
	if code := run([]string{"build", dir}, strings.NewReader(""), &stdout, &stderr); code != cli.ExitFailure {
		t.Fatalf("build exited %d, want %d; standard error:\n%s", code, cli.ExitFailure, stderr.String())
	}
	// kustomize's origins give the file; the document and line are found in it, as render gives them.
	want := filepath.Join(dir, "c.yaml") + `: document 1 (line 12): error: Sandbox ns/c: spec.volumeClaimTemplates[0].metadata.name: Invalid value: "a-b": renders PersistentVolumeClaim ns/a-b-c, which Sandbox ns/b-c renders too; rename one of them` + "\n" +
		"sandbox-render: the input has problems; nothing was written\n"
	if diff := cmp.Diff(want, stderr.String()); diff != "" {
		t.Errorf("standard error (-want +got):\n%s", diff)
	}
}

// TestFunctionFindingMessages: the function's findings on standard error, which is all kustomize
// shows of them (it drops a failing function's results), name the file kustomize gave, or say how
// to get it.
func TestFunctionFindingMessages(t *testing.T) {
	list := func(annotations string) string {
		return "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: agents.x-k8s.io/v1beta1\n  kind: Sandbox\n  metadata:\n    name: x\n    namespace: ns\n" +
			annotations + "  spec: {}\n"
	}
	const finding = "error: Sandbox ns/x: spec.podTemplate: Required value\n"
	cases := map[string]struct {
		reason string
		stdin  string
		want   string
	}{
		"NoFile": {
			reason: "kustomize without originAnnotations gives no file: the finding named the object and field, and nothing said how to get the file",
			stdin:  list("    annotations:\n      config.kubernetes.io/index: '0'\n"),
			want: finding + "sandbox-render: the input has problems; no item names its file " +
				"(kustomize names them with buildMetadata: [originAnnotations] in the kustomization)\n",
		},
		"Origin": {
			reason: "with originAnnotations the finding names the file kustomize gives, relative to the tree",
			stdin:  list("    annotations:\n      config.kubernetes.io/origin: |\n        path: sub/x.yaml\n"),
			want:   "sub/x.yaml: " + finding + "sandbox-render: the input has problems\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{"fn"}, strings.NewReader(tc.stdin), &stdout, &stderr); code != cli.ExitFailure {
				t.Fatalf("%s: exit %d, want %d; standard error:\n%s", tc.reason, code, cli.ExitFailure, stderr.String())
			}
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("%s\nstandard error (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWarningMessages: a template's own NetworkPolicy that shuts out the router and DNS (an
// egress-only policy, rendered as upstream renders it) renders, exit 0, with one warning line per
// finding on standard error, placed and worded as findings are, in render, validate and build
// (rendering in process, and as kustomize runs the function); the function gives them as results
// of severity warning on the template and the field, with its file, and writes nothing on
// standard error.
func TestWarningMessages(t *testing.T) {
	const template = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata:\n  name: python\n  namespace: ns\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: python\n        image: python:3.12\n  networkPolicy:\n    egress:\n    - ports:\n      - port: 443\n"
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"kustomization.yaml": "resources:\n- template.yaml\ntransformers:\n- render.yaml\n",
		"render.yaml":        strings.Replace(restrictedConfig, "restricted: true", "restricted: false", 1),
		"template.yaml":      template,
	})
	// Each at its field's line: egress at its own, ingress (not written) at networkPolicy's.
	at := func(line int) string {
		return fmt.Sprintf("%s: document 1 (line %d): ", filepath.Join(dir, "template.yaml"), line)
	}
	warnings := at(13) + "warning: SandboxTemplate ns/python: spec.networkPolicy.egress: its one rule does not allow UDP or TCP port 53 to the cluster DNS (pods k8s-app=kube-dns in namespace kube-system, or a private address), yet the Pods resolve names through the cluster DNS (dnsPolicy unset, which is ClusterFirst) and a custom policy gets no DNS rule and no DNS override: every name lookup in these sandboxes fails; add an egress rule for UDP and TCP port 53 to the cluster DNS (a peer with namespaceSelector kubernetes.io/metadata.name=kube-system and podSelector k8s-app=kube-dns), or set spec.podTemplate.spec.dnsPolicy\n" +
		at(12) + "warning: SandboxTemplate ns/python: spec.networkPolicy.ingress: is empty, and the rendered NetworkPolicy lists Ingress in its policyTypes (upstream renders Ingress and Egress for every custom policy), so it admits no ingress: the sandbox router cannot reach these sandboxes; add an ingress rule from the router's namespace (a peer with namespaceSelector kubernetes.io/metadata.name=agent-sandbox-system and podSelector app=sandbox-router)\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"render", filepath.Join(dir, "template.yaml")}, warnings},
		{[]string{"validate", filepath.Join(dir, "template.yaml")}, warnings + "1 objects checked: no problems\n"},
		{[]string{"build", dir}, warnings},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%v: exit %d, want 0 (warnings do not fail); standard error:\n%s", tc.args, code, stderr.String())
		}
		if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
			t.Errorf("%v: standard error (-want +got):\n%s", tc.args, diff)
		}
	}
	// As kustomize runs it, the function hands its warnings to the build (ResultsDirFlag).
	bin := testenv.SandboxRender(t)
	cmd := exec.Command(bin, "build", "--no-fast-path", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build --no-fast-path: %v; standard error:\n%s", err, stderr.String())
	}
	want := warnings + "sandbox-render: note: the render runs as kustomize runs it, which is slow on large trees: disabled by the caller\n"
	if diff := cmp.Diff(want, stderr.String()); diff != "" {
		t.Errorf("build --no-fast-path: standard error (-want +got):\n%s", diff)
	}
	if !strings.Contains(stdout.String(), "name: python-network-policy") {
		t.Errorf("build --no-fast-path rendered no NetworkPolicy:\n%s", stdout.String())
	}

	// The function: results, exit 0, nothing on standard error.
	list := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " +
		strings.ReplaceAll(strings.Replace(strings.TrimSuffix(template, "\n"), "  namespace: ns\n", "  namespace: ns\n  annotations:\n    internal.config.kubernetes.io/path: template.yaml\n    internal.config.kubernetes.io/index: '0'\n", 1), "\n", "\n  ") + "\n"
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"fn"}, strings.NewReader(list), &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("fn: exit %d, want 0; standard error:\n%s", code, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("fn wrote on standard error:\n%s", stderr.String())
	}
	rl, err := kyaml.Parse(stdout.String())
	if err != nil {
		t.Fatal(err)
	}
	node, err := rl.Pipe(kyaml.Lookup("results"))
	if err != nil || node == nil {
		t.Fatalf("no results: %v\n%s", err, stdout.String())
	}
	var got framework.Results
	if err := node.YNode().Decode(&got); err != nil {
		t.Fatal(err)
	}
	ref := &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxTemplate"}, NameMeta: kyaml.NameMeta{Name: "python", Namespace: "ns"}}
	// The message is the warning's own: the result names the object and the field.
	lines := strings.Split(strings.TrimSuffix(strings.NewReplacer(at(13)+"warning: SandboxTemplate ns/python: ", "", at(12)+"warning: SandboxTemplate ns/python: ", "").Replace(warnings), "\n"), "\n")
	var wantResults framework.Results
	for i, f := range []string{"spec.networkPolicy.egress", "spec.networkPolicy.ingress"} {
		wantResults = append(wantResults, &framework.Result{Severity: framework.Warning, Message: strings.TrimPrefix(lines[i], f+": "), ResourceRef: ref,
			Field: &framework.Field{Path: f}, File: &framework.File{Path: "template.yaml"}, Tags: map[string]string{"sandbox-gitops.dev/document": "1"}})
	}
	if diff := cmp.Diff(wantResults, got); diff != "" {
		t.Errorf("fn: results (-want +got):\n%s", diff)
	}
}
