package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// copyTree copies the repository's bases and one overlay into a temporary root, so a test can
// point the output at the sources without touching the repository.
func copyTree(t *testing.T, overlay string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bases", filepath.Join("overlays", overlay)} {
		src := filepath.Join(testenv.RepoRoot(), d)
		err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(testenv.RepoRoot(), p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

func runBuild(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"build"}, args...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestBuildNeverLosesAFile: --output-dir into the kustomization's own directory, into a
// directory holding files it did not write, and -o onto a directory or a foreign file are all
// refused with a message saying what to do, and change nothing.
func TestBuildNeverLosesAFile(t *testing.T) {
	root := copyTree(t, "kind")
	kind := filepath.Join(root, "overlays", "kind")
	writeTree(t, kind, map[string]string{"mine.yaml": "# my notes\n"})
	before := snapshot(t, kind)
	otherDir := filepath.Join(root, "deploy")
	writeTree(t, otherDir, map[string]string{"notes.txt": "keep me\n"})
	foreign := filepath.Join(root, "foreign.yaml")
	writeTree(t, root, map[string]string{"foreign.yaml": "kind: Pod\n"})
	cases := map[string]struct {
		args       []string
		wantStderr string
	}{
		"output-dir is the kustomization":      {[]string{kind, "--output-dir", kind}, "it holds the sources of the build"},
		"output-dir holds the bases":           {[]string{kind, "--output-dir", filepath.Join(root, "bases")}, "it holds the sources of the build"},
		"output-dir holds someone else's file": {[]string{kind, "--output-dir", otherDir}, "files sandbox-render did not write (notes.txt); move them away, or choose an empty or new directory"},
		"-o onto a directory":                  {[]string{kind, "-o", otherDir}, "it is a directory; use --output-dir"},
		"-o onto a foreign file":               {[]string{kind, "-o", foreign}, "sandbox-render did not write it"},
		"-o onto a source":                     {[]string{kind, "-o", filepath.Join(kind, "render.yaml")}, "it is a source of the build"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runBuild(t, tc.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, cli.ExitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantStderr, stderr)
			}
			if stdout != "" {
				t.Errorf("wrote to stdout: %s", stdout)
			}
		})
	}
	if diff := cmp.Diff(before, snapshot(t, kind)); diff != "" {
		t.Errorf("the kustomization's directory changed (-before +after):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(otherDir, "notes.txt")); string(b) != "keep me\n" {
		t.Errorf("notes.txt changed: %q", b)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "kind: Pod\n" {
		t.Errorf("foreign.yaml changed: %q", b)
	}
}

// TestBuildOutputFile: -o FILE writes a file (not a directory) with the build's stream, and
// replaces it on the next run.
func TestBuildOutputFile(t *testing.T) {
	overlay := filepath.Join(testenv.RepoRoot(), "overlays", "kind")
	out := filepath.Join(t.TempDir(), "all.yaml")
	for range 2 {
		if code, _, stderr := runBuild(t, overlay, "-o", out); code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	info, err := os.Stat(out)
	if err != nil || info.IsDir() {
		t.Fatalf("%s is not a file: %v", out, err)
	}
	got, _ := os.ReadFile(out)
	want, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "golden", "testdata", "overlays", "kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kbuild.OutputFileHeader+string(want), string(got)); diff != "" {
		t.Errorf("-o file (-want +got):\n%s", diff)
	}
}

// TestBuildOutputDir: build --output-dir writes one file per object, a kustomization.yaml and its
// list of files; a later build removes the files it wrote that are no longer objects, and only
// those.
func TestBuildOutputDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "deploy")
	airgapped := filepath.Join(testenv.RepoRoot(), "overlays", "airgapped")
	code, _, stderr := runBuild(t, airgapped, "--output-dir", out)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "wrote ") {
		t.Errorf("no progress line on stderr: %s", stderr)
	}
	names := func() []string {
		var n []string
		for f := range snapshot(t, out) {
			n = append(n, f)
		}
		slices.Sort(n)
		return n
	}
	first := names()
	for _, n := range []string{kbuild.MarkerFile, "kustomization.yaml", "networking.k8s.io_v1_networkpolicy_python-runtime-network-policy.yaml", "v1_pod_python-runtime-7nx88.yaml"} {
		if !slices.Contains(first, n) {
			t.Errorf("%s not written; got %v", n, first)
		}
	}
	// An object an earlier build wrote and this one does not: listed in the marker, removed.
	stale := "v1_pod_gone.yaml"
	writeTree(t, out, map[string]string{stale: "kind: Pod\n"})
	marker, _ := os.ReadFile(filepath.Join(out, kbuild.MarkerFile))
	writeTree(t, out, map[string]string{kbuild.MarkerFile: string(marker) + stale + "\n"})
	code, _, stderr = runBuild(t, airgapped, "--output-dir", out)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "removed "+filepath.Join(out, stale)) {
		t.Errorf("the stale file's removal is not reported: %s", stderr)
	}
	if diff := cmp.Diff(first, names()); diff != "" {
		t.Errorf("files after the second build (-first +second):\n%s", diff)
	}
	// A directory written before the marker existed: its kustomization.yaml lists what is ours.
	legacy := filepath.Join(t.TempDir(), "legacy")
	writeTree(t, legacy, map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n# Written by sandbox-render build --output-dir; do not edit.\nresources:\n- v1_pod_old.yaml\n",
		"v1_pod_old.yaml":    "kind: Pod\n",
	})
	if code, _, stderr := runBuild(t, airgapped, "--output-dir", legacy); code != cli.ExitOK {
		t.Fatalf("a directory an earlier version wrote is refused: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(legacy, "v1_pod_old.yaml")); !os.IsNotExist(err) {
		t.Errorf("the old version's stale file survived: %v", err)
	}
}

// TestHelpExamples runs the example of every command's --help, as written, in a copy of the
// repository's trees with the built binary on PATH.
func TestHelpExamples(t *testing.T) {
	self := testenv.SandboxRender(t)
	root := copyTree(t, "production")
	for _, d := range []string{filepath.Join("overlays", "kind"), filepath.Join("docs", "example")} {
		src := filepath.Join(testenv.RepoRoot(), d)
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			writeTree(t, filepath.Join(root, d), map[string]string{e.Name(): string(b)})
		}
	}
	bin := t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "sandbox-render")); err != nil {
		t.Fatal(err)
	}
	cmds := newRoot(strings.NewReader(""), io.Discard, io.Discard).Commands()
	for _, c := range cmds {
		if c.Name() == "help" || c.Name() == "completion" || c.Name() == "migrate" {
			// migrate's examples need a v1alpha1 tree (and --check exits 1 by design):
			// TestMigrateHelpExamplesRun runs them on one.
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Fatalf("%s --help has no example", c.Name())
			}
			for _, line := range strings.Split(c.Example, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Errorf("`%s`: %v\n%s", line, err, stderr.String())
				}
				writes := strings.HasSuffix(line, "sandbox-render render") || strings.Contains(line, "sandbox-render render ") ||
					strings.Contains(line, "sandbox-render build") && !strings.Contains(line, "-o ") && !strings.Contains(line, "--output-dir")
				if writes && !strings.Contains(stdout.String(), "kind: ") {
					t.Errorf("`%s` wrote no objects:\n%s", line, stdout.String())
				}
			}
		})
	}
}

// TestBuildOutputDirStaysInside: whatever a pass-through object is called, --output-dir writes
// only plain files inside the directory (a name with ../ once overwrote a file two levels up),
// objects whose names differ only in case get files of their own, a symbolic link in the
// directory is refused, and a marker that lists a path outside the directory removes nothing.
func TestBuildOutputDirStaysInside(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "tree")
	writeTree(t, tree, map[string]string{
		"kustomization.yaml": "resources:\n- cms.yaml\n",
		"cms.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: x/../../victim
data: {a: evil}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: foo
data: {a: lower}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: Foo
data: {a: upper}
`,
	})
	victim := filepath.Join(root, "a", "victim")
	writeTree(t, filepath.Join(root, "a"), map[string]string{"victim": "keep me\n", "b/.keep": ""})
	out := filepath.Join(root, "a", "b", "out")
	code, _, stderr := runBuild(t, tree, "--output-dir", out)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Fatalf("a file outside the output directory was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a", "b", "victim.yaml")); b != nil {
		t.Fatalf("a file was written outside the output directory")
	}
	got := snapshot(t, out)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{kbuild.MarkerFile, "kustomization.yaml", "v1_configmap_foo-6fed7810.yaml", "v1_configmap_foo.yaml", "v1_configmap_x_.__.__victim-2e2b9d12.yaml"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	for file, data := range map[string]string{"v1_configmap_foo.yaml": "lower", "v1_configmap_foo-6fed7810.yaml": "upper"} {
		if !strings.Contains(got[file], "a: "+data) {
			t.Errorf("%s does not hold the ConfigMap with %q:\n%s", file, data, got[file])
		}
	}
	// kustomize builds the directory back into the same three objects.
	code, stdout, stderr := runBuild(t, out)
	if code != cli.ExitOK || strings.Count(stdout, "kind: ConfigMap") != 3 {
		t.Errorf("the written directory does not build back into three ConfigMaps (exit %d): %s\n%s", code, stderr, stdout)
	}

	t.Run("a symbolic link in the directory", func(t *testing.T) {
		outside := filepath.Join(root, "outside.yaml")
		writeTree(t, root, map[string]string{"outside.yaml": "keep me\n"})
		if err := os.Remove(filepath.Join(out, "v1_configmap_foo.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(out, "v1_configmap_foo.yaml")); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runBuild(t, tree, "--output-dir", out)
		if code != cli.ExitUsage || !strings.Contains(stderr, "is a symbolic link") {
			t.Errorf("exit %d, want %d naming the link: %s", code, cli.ExitUsage, stderr)
		}
		if b, _ := os.ReadFile(outside); string(b) != "keep me\n" {
			t.Errorf("written through the link: %q", b)
		}
		os.Remove(filepath.Join(out, "v1_configmap_foo.yaml"))
	})

	t.Run("a marker listing a path outside", func(t *testing.T) {
		marker, err := os.ReadFile(filepath.Join(out, kbuild.MarkerFile))
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, out, map[string]string{kbuild.MarkerFile: string(marker) + "../victim\n../../victim\n/etc/hostname\n"})
		code, _, stderr := runBuild(t, tree, "--output-dir", out)
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if strings.Contains(stderr, "removed") {
			t.Errorf("removed something the marker should not name: %s", stderr)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
			t.Errorf("the file outside was changed: %q", b)
		}
	})
}
