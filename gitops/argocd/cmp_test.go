package argocd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// plugin is the part of a ConfigManagementPlugin the tests run.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Version  string `json:"version"`
		Discover struct {
			Find struct {
				Command []string `json:"command"`
			} `json:"find"`
		} `json:"discover"`
		Generate struct {
			Command []string `json:"command"`
		} `json:"generate"`
	} `json:"spec"`
}

// TestPluginGeneratesTheGoldens runs the plugin's discover and generate commands the way the
// cmp-server does in the release's sandbox-render image (in the application's directory, a PATH
// holding sandbox-render and nothing else: no shell, no grep) on every overlay: the directory
// must be discovered and the manifests must be the overlay's golden, built in one pass.
func TestPluginGeneratesTheGoldens(t *testing.T) {
	b, err := os.ReadFile("cmp/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p plugin
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "argoproj.io/v1alpha1" || p.Kind != "ConfigManagementPlugin" || len(p.Spec.Generate.Command) == 0 {
		t.Fatalf("not a ConfigManagementPlugin with a generate command: %+v", p)
	}
	self := testenv.SandboxRender(t)
	path := t.TempDir()
	if err := os.Symlink(self, filepath.Join(path, "sandbox-render")); err != nil {
		t.Fatal(err)
	}
	root := testenv.RepoRoot()
	dirs, _ := filepath.Glob(filepath.Join(root, "overlays", "*"))
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			found := run(t, dir, path, p.Spec.Discover.Find.Command)
			if strings.TrimSpace(string(found)) == "" {
				t.Errorf("discover did not match the overlay")
			}
			got, stderr := runWithStderr(t, dir, path, p.Spec.Generate.Command)
			if strings.Contains(stderr, "note:") {
				t.Errorf("the plugin did not build in one pass: %s", stderr)
			}
			want, err := os.ReadFile(filepath.Join(root, "golden", "testdata", "overlays", filepath.Base(dir)+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("plugin output (-golden +plugin):\n%s", diff)
			}
		})
	}
	t.Run("not discovered elsewhere", func(t *testing.T) {
		if found := run(t, filepath.Join(root, "bases", "python-runtime"), path, p.Spec.Discover.Find.Command); len(found) != 0 {
			t.Errorf("discover matched a directory without a SandboxRender config: %q", found)
		}
	})
}

// TestExecPathBuildOptions runs the real kustomize with exactly the buildOptions of the argocd-cm
// snippet, as Argo CD's repo-server does, and gets the goldens.
func TestExecPathBuildOptions(t *testing.T) {
	b, err := os.ReadFile("argocd-cm-kustomize.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	opts := strings.Fields(cm.Data["kustomize.buildOptions"])
	if len(opts) == 0 {
		t.Fatal("no kustomize.buildOptions in the snippet")
	}
	kustomize := testenv.Tool(t, "kustomize")
	testenv.SandboxRender(t) // the overlays' exec path
	root := testenv.RepoRoot()
	dirs, _ := filepath.Glob(filepath.Join(root, "overlays", "*"))
	for _, dir := range dirs {
		got := run(t, root, os.Getenv("PATH"), append(append([]string{kustomize, "build"}, opts...), dir))
		want, err := os.ReadFile(filepath.Join(root, "golden", "testdata", "overlays", filepath.Base(dir)+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s with the argocd-cm buildOptions (-golden +kustomize):\n%s", filepath.Base(dir), diff)
		}
	}
}

func run(t *testing.T, dir, path string, command []string) []byte {
	t.Helper()
	out, _ := runWithStderr(t, dir, path, command)
	return out
}

// runWithStderr runs command in dir with only path as PATH, resolving the command on it as the
// cmp-server does.
func runWithStderr(t *testing.T, dir, path string, command []string) ([]byte, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	name := command[0]
	if !strings.Contains(name, "/") {
		// Resolve on the given PATH, as the cmp-server does; not on the test's own PATH.
		found := false
		for _, d := range filepath.SplitList(path) {
			if p := filepath.Join(d, name); isExecutable(p) {
				name, found = p, true
				break
			}
		}
		if !found {
			t.Fatalf("%v: %s is not on PATH %s (the image has no such binary)", command, name, path)
		}
	}
	cmd := exec.Command(name, command[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir()}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v in %s: %v\n%s", command, dir, err, stderr.String())
	}
	return stdout.Bytes(), stderr.String()
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
