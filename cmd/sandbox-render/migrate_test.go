package main

import (
	"bytes"
	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// v1alpha1Tree writes a small repository of v1alpha1 manifests (and one object of another kind)
// into a temporary directory and returns it with its files' contents.
func v1alpha1Tree(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"templates/python.yaml": `# the runtime
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxTemplate
metadata:
  name: python
  namespace: default
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: "python:3.12"
  envVarsInjectionPolicy: Allowed
---
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxWarmPool
metadata:
  name: python-pool
  namespace: default
spec:
  replicas: 0
  sandboxTemplateRef:
    name: python
`,
		"claims/agent.yml": `apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxClaim
metadata:
  name: agent
  namespace: default
spec:
  sandboxTemplateRef:
    name: python
  warmpool: python-pool   # drawn from the pool
  env:
  - name: ANTHROPIC_API_KEY
    valueFrom:
      secretKeyRef:
        name: anthropic
        key: api-key
`,
		"sandboxes/paused.yaml": `apiVersion: agents.x-k8s.io/v1alpha1
kind: Sandbox
metadata:
  name: paused
  namespace: default
spec:
  replicas: 0
  podTemplate:
    spec:
      containers:
      - name: c
        image: busybox
`,
		"other/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {a: b}\n",
		"README.md":            "not YAML, not read\n",
	}
	contents := map[string][]byte{}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
		contents[p] = []byte(text)
	}
	return dir, contents
}

func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, dir)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestMigrateCheckMigrateIdempotent: --check exits 1 on a v1alpha1 tree and changes nothing;
// migrate rewrites it; then --check exits 0 and a second migrate changes nothing. The migrated
// tree renders to exactly what the v1alpha1 tree renders to.
func TestMigrateCheckMigrateIdempotent(t *testing.T) {
	dir, _ := v1alpha1Tree(t)
	before := snapshotTree(t, dir)
	code, renderedBefore, stderr := runCLI(t, "render", dir)
	if code != cli.ExitOK {
		t.Fatalf("render of the v1alpha1 tree: exit %d\n%s", code, stderr)
	}

	code, stdout, stderr := runCLI(t, "migrate", "--check", dir)
	if code != cli.ExitFailure {
		t.Fatalf("--check on a v1alpha1 tree: exit %d, want 1\n%s", code, stderr)
	}
	for _, f := range []string{"claims/agent.yml", "sandboxes/paused.yaml", "templates/python.yaml"} {
		if !strings.Contains(stdout, filepath.Join(dir, f)) {
			t.Errorf("--check does not list %s:\n%s", f, stdout)
		}
	}
	if strings.Contains(stdout, "configmap") {
		t.Errorf("--check lists a file without v1alpha1 objects:\n%s", stdout)
	}
	if diff := cmp.Diff(before, snapshotTree(t, dir)); diff != "" {
		t.Fatalf("--check changed files (-before +after):\n%s", diff)
	}

	if code, stdout, stderr = runCLI(t, "migrate", dir); code != cli.ExitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "migrated "+filepath.Join(dir, "templates/python.yaml")+" (2 objects)") {
		t.Errorf("no report of the migrated template file:\n%s", stdout)
	}
	after := snapshotTree(t, dir)
	wantClaim := strings.Replace(strings.Replace(before["/claims/agent.yml"],
		"  sandboxTemplateRef:\n    name: python\n  warmpool: python-pool   # drawn from the pool\n", "  warmPoolRef:\n    name: python-pool\n", 1),
		"v1alpha1", "v1beta1", 1)
	if diff := cmp.Diff(wantClaim, after["/claims/agent.yml"]); diff != "" {
		t.Errorf("migrated claim (-want +got):\n%s", diff)
	}
	if after["/other/configmap.yaml"] != before["/other/configmap.yaml"] || after["/README.md"] != before["/README.md"] {
		t.Error("migrate changed a file without v1alpha1 objects")
	}
	if info, err := os.Stat(filepath.Join(dir, "claims/agent.yml")); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("the migrated file lost its permissions: %v %v", info.Mode(), err)
	}

	if code, _, stderr = runCLI(t, "migrate", "--check", dir); code != cli.ExitOK {
		t.Errorf("--check after migrate: exit %d, want 0\n%s", code, stderr)
	}
	if code, _, stderr = runCLI(t, "migrate", dir); code != cli.ExitOK || !strings.Contains(stderr, "nothing to migrate") {
		t.Errorf("second migrate: exit %d\n%s", code, stderr)
	}
	if diff := cmp.Diff(after, snapshotTree(t, dir)); diff != "" {
		t.Errorf("a second migrate changed files (-first +second):\n%s", diff)
	}

	code, renderedAfter, stderr := runCLI(t, "render", dir)
	if code != cli.ExitOK {
		t.Fatalf("render of the migrated tree: exit %d\n%s", code, stderr)
	}
	// The same objects; the bytes differ only in key order, because a v1beta1 source is passed
	// through as written while a v1alpha1 one is converted and written in canonical order.
	decode := func(s string) []map[string]any {
		objs, err := manifest.Parse("out.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]map[string]any, len(objs))
		for i, o := range objs {
			out[i] = o.Object
		}
		return out
	}
	if diff := cmp.Diff(decode(renderedBefore), decode(renderedAfter)); diff != "" {
		t.Errorf("the migrated tree renders differently (-v1alpha1 +migrated):\n%s", diff)
	}
}

// TestMigrateWritesNothingOnError: a file that is not YAML, or a claim whose conversion would
// lose its template, stops the whole migration before anything is written.
func TestMigrateWritesNothingOnError(t *testing.T) {
	cases := map[string]struct {
		file, text string
		wantStderr []string
	}{
		"not yaml": {"broken.yaml", "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: tab\n",
			[]string{"broken.yaml: document 2, line 7: YAML syntax: found character that cannot start any token", "not valid YAML; no file was changed"}},
		"duplicate key": {"dup.yaml", "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata:\n  name: dup\nspec:\n  replicas: 0\n  replicas: 1\n",
			// It exited 0 and wrote operatingMode: Suspended beside replicas: 1, which render refused.
			[]string{`dup.yaml: document 1, line 7: mapping key "replicas" already defined at line 6`, "no file was changed"}},
		"duplicate spec": {"dup.yaml", "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata:\n  name: dup\nspec:\n  replicas: 0\nspec: {}\n",
			// It was an internal error: "the re-encoded document does not read back ...; please report this".
			[]string{`dup.yaml: document 1, line 7: mapping key "spec" already defined at line 5`, "no file was changed"}},
		"lossy claim": {"claims/other.yaml", "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nmetadata:\n  name: other\n  namespace: default\nspec:\n  sandboxTemplateRef:\n    name: gpu\n  warmpool: python-pool\n",
			[]string{`other.yaml:8: error: SandboxClaim default/other: spec.sandboxTemplateRef.name: Invalid value: "gpu": converting to v1beta1 would lose it: a v1beta1 claim takes its template from its pool, and pool "python-pool" uses template "python"`, "no file was changed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := v1alpha1Tree(t)
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshotTree(t, dir)
			code, stdout, stderr := runCLI(t, "migrate", dir)
			if code != cli.ExitFailure {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout: %s", stdout)
			}
			if diff := cmp.Diff(before, snapshotTree(t, dir)); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestMigrateKeepsSymlinks: a symlinked manifest is migrated through the link, which stays a link.
func TestMigrateKeepsSymlinks(t *testing.T) {
	dir, _ := v1alpha1Tree(t)
	link := filepath.Join(t.TempDir(), "link.yaml")
	target := filepath.Join(dir, "sandboxes/paused.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "migrate", link); code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(target)
	if !strings.Contains(string(b), "operatingMode: Suspended") {
		t.Errorf("the target was not migrated:\n%s", b)
	}
}

// TestMigrateHelpExamplesRun runs the commands of migrate --help's examples on a v1alpha1 tree.
func TestMigrateHelpExamplesRun(t *testing.T) {
	code, help, _ := runCLI(t, "migrate", "--help")
	if code != cli.ExitOK || !strings.Contains(help, "Examples:") || !strings.Contains(help, "Exit codes") {
		t.Fatalf("migrate --help (exit %d):\n%s", code, help)
	}
	dir, _ := v1alpha1Tree(t)
	wantCodes := []int{cli.ExitFailure, cli.ExitOK}
	ran := 0
	for _, l := range strings.Split(migrateExample, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "sandbox-render ") {
			continue
		}
		l, _, _ = strings.Cut(l, " && ")
		args := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(l, "sandbox-render "), "./manifests", dir))
		if code, _, stderr := runCLI(t, args...); code != wantCodes[ran] {
			t.Errorf("%s: exit %d, want %d\n%s", l, code, wantCodes[ran], stderr)
		}
		ran++
	}
	if ran != len(wantCodes) {
		t.Errorf("ran %d example commands, want %d", ran, len(wantCodes))
	}
}

func TestMigrateUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"no argument": {"migrate"},
		"stdin":       {"migrate", "-"},
		"missing":     {"migrate", filepath.Join(t.TempDir(), "absent.yaml")},
		"empty dir":   {"migrate", t.TempDir()},
	} {
		if code, _, stderr := runCLI(t, args...); code != cli.ExitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, stderr)
		}
	}
}
