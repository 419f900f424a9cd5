package deathsig_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv/deathsig"
)

// childEnv, set, makes this test binary TestWrappedDiesWithParent's child: it starts sleep
// through Wrap under the name etcd, prints its pid and waits to be killed.
const childEnv = "DEATHSIG_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	paths, err := deathsig.Wrap(os.Getenv(childEnv), map[string]string{"etcd": sleep})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(paths["etcd"], "3600")
	if err := deathsig.Do(cmd.Start); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	for {
		time.Sleep(time.Hour)
	}
}

// TestWrappedDiesWithParent: a process started through Wrap runs the real binary in its place
// (same pid) and gets SIGKILL when the test binary that started it is SIGKILLed.
func TestWrappedDiesWithParent(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary to run")
	}
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), childEnv+"="+t.TempDir())
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	// The exec replaced the test binary: the pid runs sleep itself, with sleep's arguments.
	eventually(t, func() error {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return err
		}
		if filepath.Base(exe) != "sleep" {
			return fmt.Errorf("pid %d runs %s", pid, exe)
		}
		return nil
	})
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	eventually(t, func() error {
		if alive(pid) {
			return fmt.Errorf("sleep (pid %d) still runs after its parent was killed", pid)
		}
		return nil
	})
}

// alive: pid is a process that has not ended (a zombie, waiting for its reaper, has ended).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
