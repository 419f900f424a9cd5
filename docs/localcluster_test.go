package docs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// scriptTimeout bounds each cluster script: the cluster starts in about 12 s and docs/example
// converges in a few more; `make build` and `make release` in the copy are cache hits but for the
// images' layers.
const scriptTimeout = 5 * time.Minute

// TestLocalClusterSection runs each ```sh block of README.md marked <!-- local-cluster --> as one
// bash script (set -euo pipefail), exactly as written, in a copy of the repository whose ./bin
// holds the tools `make tools` built: a newcomer's first session on the local cluster, with the
// controller in the background. Whatever the script leaves behind (a cluster, the controller) is
// stopped when the test ends, however it ends.
func TestLocalClusterSection(t *testing.T) {
	runMarkedScripts(t, "local-cluster", append(append([]string{}, cluster.Binaries...), cluster.KwokStagesDir, "kustomize"))
}

// TestRealNodeSection runs the README's blocks marked <!-- real-node --> the same way: a release
// installed in the cluster with a real node, its controller running from the release's image. It
// needs root and runs in make e2e-node (SANDBOX_REAL_NODE=1), one real node at a time; the copy
// is a git repository with one commit, as a clone is, because `make release` names its commit.
func TestRealNodeSection(t *testing.T) {
	if os.Getenv("SANDBOX_REAL_NODE") != "1" {
		t.Skip("the real node needs root and is started only under SANDBOX_REAL_NODE=1 (make e2e-node)")
	}
	runMarkedScripts(t, "real-node", append(append(append([]string{}, cluster.Binaries...), cluster.KwokStagesDir, "kustomize"), cluster.NodeBinaries...))
}

// runMarkedScripts runs README.md's blocks marked <!-- marker --> in a copy of the repository
// that has the named tools in its ./bin and has run `make build`.
func runMarkedScripts(t *testing.T, marker string, tools []string) {
	bin := testenv.BinDir()
	for _, name := range tools {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			testenv.Missing(t, "%s not found in %s; run `make tools`", name, bin)
		}
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		testenv.Missing(t, "kubectl not found on PATH: the README's commands use it")
	}
	root := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, m := range shellBlock.FindAllSubmatch(b, -1) {
		if string(m[2]) == marker {
			scripts = append(scripts, string(m[3]))
		}
	}
	if len(scripts) == 0 {
		t.Fatalf("README.md has no block marked <!-- %s -->", marker)
	}
	clone := copyRepo(t, root)
	if err := os.MkdirAll(filepath.Join(clone, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range tools {
		if err := os.Symlink(filepath.Join(bin, name), filepath.Join(clone, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"git", "init", "-q"}, {"git", "add", "-A"},
		{"git", "-c", "user.name=docs", "-c", "user.email=docs@example.com", "commit", "-q", "-m", "clone"},
		{"make", "build"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = clone
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for i, script := range scripts {
		runClusterScript(t, clone, marker, i, script)
	}
}

// runClusterScript runs one script in its own process group, and afterwards kills that group and
// stops a cluster the script left running.
func runClusterScript(t *testing.T, clone, marker string, i int, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent/kubeconfig-the-script-must-export")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the controller, if the script failed before its kill
	}
	dir := filepath.Join(clone, ".cluster")
	if left, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid")); len(left) > 0 {
		down := exec.Command("go", "run", "./hack/cluster", "down", "-dir", dir)
		down.Dir = clone
		if o, derr := down.CombinedOutput(); derr != nil {
			t.Errorf("stopping the cluster the script left: %v\n%s", derr, o)
		}
		if err == nil {
			t.Errorf("script %d left the cluster running: its last command should stop it", i)
		}
	}
	if err != nil {
		t.Fatalf("README.md's %s script %d failed after %v: %v\n--- script:\n%s\n--- output:\n%s", marker, i, time.Since(start).Round(time.Millisecond), err, script, out.String())
	}
	t.Logf("%s script %d ran in %v; its output:\n%s", marker, i, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
}
