package deathsig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// parentFile, in a directory Wrap made, holds the pid of the test binary that made it.
const parentFile = ".parent"

// realLink is the name of the symlink, beside the one named name, to the real binary.
func realLink(name string) string { return "." + name + ".real" }

// Wrap makes, in dir, a symlink to this test binary for each name, beside a link to the real
// binary (real[name]), and returns the paths to start instead of the real ones. A process
// started from such a path, with this test binary's parent, runs the real binary and is killed
// when this test binary ends.
func Wrap(dir string, real map[string]string) (map[string]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the test binary to run kube-apiserver and etcd through: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, parentFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for name, target := range real {
		if !wrapped(name) {
			return nil, fmt.Errorf("deathsig.Wrap: %s is not one of the binaries this package's init runs", name)
		}
		abs, err := filepath.Abs(target)
		if err != nil {
			return nil, err
		}
		for link, to := range map[string]string{realLink(name): abs, name: self} {
			p := filepath.Join(dir, link)
			_ = os.Remove(p) // Wrap may run again on the same directory (a second start)
			if err := os.Symlink(to, p); err != nil {
				return nil, err
			}
		}
		paths[name] = filepath.Join(dir, name)
	}
	return paths, nil
}

// wrapped are the names under which a test binary runs another binary in its place.
func wrapped(name string) bool { return name == "kube-apiserver" || name == "etcd" }

func init() {
	// A test binary is named <package>.test, so it never takes this branch by accident; a
	// directory without the links is not Wrap's, and the binary goes on as itself.
	name := filepath.Base(os.Args[0])
	if !wrapped(name) {
		return
	}
	dir := filepath.Dir(os.Args[0])
	real, err := os.Readlink(filepath.Join(dir, realLink(name)))
	if err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, parentFile))
	if err != nil {
		fail(name, err)
	}
	parent, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		fail(name, err)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fail(name, fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", errno))
	}
	// The parent may have died before the request above: then no signal comes, and the
	// process must not start.
	if os.Getppid() != parent {
		fail(name, fmt.Errorf("the test binary (pid %d) that started it is gone", parent))
	}
	err = syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fail(name, fmt.Errorf("exec %s: %w", real, err))
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "deathsig: not starting %s: %v\n", name, err)
	os.Exit(127)
}

func setPdeathsig(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
