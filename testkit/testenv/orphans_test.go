package testenv_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// childEnv, set, makes this test binary the child of TestNoOrphans: TestMain starts a control
// plane through testenv, says so on stdout, and then m.Run blocks in TestChildBlocks until it is
// killed or its -test.timeout fires. The control plane starts before m.Run, as in the suites'
// TestMain, so the timeout counts from a running control plane.
const childEnv = "TESTENV_ORPHANS_CHILD"

const readyLine = "control plane running"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		env := testenv.Wrap(&envtest.Environment{BinaryAssetsDirectory: testenv.BinDir()})
		if _, err := env.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(readyLine) // and no Stop: nothing of the child runs after its end
	}
	os.Exit(m.Run())
}

// TestChildBlocks is the child's test: it waits to be killed. Run by the test binary itself
// (not as TestNoOrphans' child) it has nothing to do.
func TestChildBlocks(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("only runs as TestNoOrphans' child")
	}
	for {
		time.Sleep(time.Hour)
	}
}

// TestNoOrphans: a test binary that dies with its control plane running, killed by SIGKILL or
// by its own -test.timeout (a panic that runs no deferred function), leaves no kube-apiserver or
// etcd behind. The child's processes are told apart from every other test's by their files,
// which are all under the child's TMPDIR, a directory of this test's own.
func TestNoOrphans(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties a child's life to its parent's")
	}
	testenv.Tool(t, "kube-apiserver")
	testenv.Tool(t, "etcd")
	cases := map[string]struct {
		timeout string
		kill    bool
		// wantExit is part of what the child says when it ends.
		wantExit string
	}{
		"SIGKILL":      {timeout: "30m", kill: true, wantExit: "signal: killed"},
		"-timeout set": {timeout: "3s", wantExit: "panic: test timed out after 3s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			marker := t.TempDir()
			child := exec.Command(os.Args[0], "-test.run=^TestChildBlocks$", "-test.timeout="+tc.timeout)
			child.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+marker)
			var stderr lockedBuffer
			child.Stderr = &stderr
			stdout, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := testenv.StartProcess(child); err != nil {
				t.Fatal(err)
			}
			ready, exited := make(chan struct{}), make(chan error, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if sc.Text() == readyLine {
						close(ready)
					}
				}
				exited <- child.Wait()
			}()
			defer func() {
				_ = child.Process.Kill() // if the test failed before the child ended
				killAll(t, processesUnder(marker))
			}()

			select {
			case <-ready:
			case err := <-exited:
				t.Fatalf("the child ended (%v) before starting its control plane:\n%s", err, stderr.String())
			case <-time.After(5 * time.Minute):
				t.Fatalf("the child's control plane did not start within 5 minutes:\n%s", stderr.String())
			}
			// Both are found while they run: the search below sees what it looks for.
			if got := processesUnder(marker); len(got) != 2 {
				t.Fatalf("%d processes with files under %s while the child runs, want kube-apiserver and etcd: %v", len(got), marker, got)
			}
			if tc.kill {
				if err := child.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			var exitErr error
			select {
			case exitErr = <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the child did not end:\n%s", stderr.String())
			}
			if said := fmt.Sprint(exitErr) + "\n" + stderr.String(); !strings.Contains(said, tc.wantExit) {
				t.Fatalf("the child ended with %v, want %q:\n%s", exitErr, tc.wantExit, stderr.String())
			}

			deadline := time.Now().Add(30 * time.Second)
			for {
				left := processesUnder(marker)
				if len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("30 s after the child ended, still running: %v", left)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// processesUnder lists the live processes (pid: command line) with an argument naming a path
// under dir. A zombie has no command line, so it is not listed.
func processesUnder(dir string) map[int]string {
	out := map[int]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir+string(filepath.Separator))) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[pid] = strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
	}
	return out
}

func killAll(t *testing.T, procs map[int]string) {
	for pid, cmdline := range procs {
		t.Logf("killing leftover %d: %s", pid, cmdline)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// lockedBuffer is the child's stderr, written by os/exec's copying goroutine and read by the
// test's failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
