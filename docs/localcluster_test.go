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

// localClusterTimeout bounds each local-cluster script: the cluster starts in about 12 s and
// docs/example converges in a few more; `make build` in the copy is a cache hit.
const localClusterTimeout = 5 * time.Minute

// TestLocalClusterSection runs each ```sh block of README.md marked <!-- local-cluster --> as one
// bash script (set -euo pipefail), exactly as written, in a copy of the repository whose ./bin
// holds the tools `make tools` built: a newcomer's first session on the local cluster, with the
// controller in the background. Whatever the script leaves behind (a cluster, the controller) is
// stopped when the test ends, however it ends.
func TestLocalClusterSection(t *testing.T) {
	bin := testenv.BinDir()
	tools := append(append([]string{}, cluster.Binaries...), cluster.KwokStagesDir, "kustomize")
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
		if len(m[1]) > 0 {
			scripts = append(scripts, string(m[2]))
		}
	}
	if len(scripts) == 0 {
		t.Fatal("README.md has no block marked <!-- local-cluster -->")
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
	build := exec.Command("make", "build")
	build.Dir = clone
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for i, script := range scripts {
		runLocalClusterScript(t, clone, i, script)
	}
}

// runLocalClusterScript runs one script in its own process group, and afterwards kills that group
// and stops a cluster the script left running.
func runLocalClusterScript(t *testing.T, clone string, i int, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), localClusterTimeout)
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
		t.Fatalf("README.md's local-cluster script %d failed after %v: %v\n--- script:\n%s\n--- output:\n%s", i, time.Since(start).Round(time.Millisecond), err, script, out.String())
	}
	t.Logf("local-cluster script %d ran in %v; its output:\n%s", i, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
}
