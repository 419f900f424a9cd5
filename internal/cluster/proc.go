package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopOrder is the order components stop in: the clients of the API server first, etcd last.
// The real node goes after the API server, which closes its connections to the node's
// processes while they still answer (a connection into a network namespace that is gone is
// never closed by its peer, and the API server would wait out its graceful shutdown on it), and
// all at once (killNodeInit): its nsenter launchers then exit with it.
var stopOrder = []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "node", "kube-router", "kube-proxy", "kubelet", "containerd", "etcd"}

// stopTimeout is how long a component gets after SIGTERM before it is killed.
const stopTimeout = 15 * time.Second

// process is one running component.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // how it exited; read only after done
}

// pidFile is where the identity of a component's process is kept: "<pid> <start time>", the
// start time (in clock ticks since boot, from /proc) telling a recycled pid from the process.
func pidFile(dir, name string) string { return filepath.Join(dir, "pids", name+".pid") }

// spawn starts one component with its output in logs/<name>.log. In-process, the child is killed
// when the launcher dies; detached, it runs in a session of its own and outlives the launcher.
func (c *Cluster) spawn(name, bin string, args, env []string) error {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own copy of the descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr(c.detached)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	start, _ := startTime(cmd.Process.Pid)
	return os.WriteFile(pidFile(c.Dir, name), fmt.Appendf(nil, "%d %s\n", cmd.Process.Pid, start), 0o644)
}

// exited reports the first component that is no longer running, with the end of its log.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, p.log, tail(p.log, 15))
		default:
		}
	}
	return nil
}

// stopProcesses stops the components this launcher started, clients first, each with SIGTERM
// and then SIGKILL after stopTimeout, and waits until each is reaped.
func (c *Cluster) stopProcesses() error {
	var errs []error
	for _, name := range stopOrder {
		for _, p := range c.procs {
			if p.name != name {
				continue
			}
			if name == "node" {
				errs = append(errs, killNodeInit(c.Dir))
			} else {
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case <-p.done:
			case <-time.After(stopTimeout):
				_ = p.cmd.Process.Kill()
				<-p.done
				errs = append(errs, fmt.Errorf("%s did not stop within %v of SIGTERM and was killed; the end of %s:\n%s", name, stopTimeout, p.log, tail(p.log, 8)))
			}
			_ = os.Remove(pidFile(c.Dir, name))
		}
	}
	return errors.Join(errs...)
}

// Down stops a cluster started from dir by another process (`make cluster`), from its pid
// files: only the processes those files name, and only while each is still the process that was
// started (same pid and start time). A cluster that is not running is not an error.
func Down(dir string) error {
	_, _, nodeErr := readPidFile(pidFile(dir, "node"))
	realNode := nodeErr == nil
	var errs []error
	for _, name := range stopOrder {
		path := pidFile(dir, name)
		pid, start, err := readPidFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if name == "node" {
			if err := killNodeInit(dir); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := stopPid(pid, start); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d): %w", name, pid, err))
			continue
		}
		_ = os.Remove(path)
	}
	if realNode {
		errs = append(errs, stopNode(dir))
	}
	return errors.Join(errs...)
}

// killNodeInit kills the real node's PID 1, and with it every process of the node: containerd,
// its shims and containers, kubelet and kube-proxy. Nothing in the node needs a graceful stop,
// and unshare itself ignores SIGTERM while it waits for its child.
func killNodeInit(dir string) error {
	pid, start, err := readPidFile(pidFile(dir, "node"))
	if err != nil || !alive(pid, start) {
		return nil
	}
	init, err := onlyChild(pid)
	if err != nil {
		return nil
	}
	if err := syscall.Kill(init, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing the node's PID 1 (%d): %w", init, err)
	}
	if !waitGone(pid, start, stopTimeout) {
		return fmt.Errorf("the node (unshare, pid %d) still runs %v after its PID 1 was killed", pid, stopTimeout)
	}
	return nil
}

// Running lists the components of the cluster in dir whose processes still run.
func Running(dir string) []string {
	var out []string
	for _, name := range stopOrder {
		pid, start, err := readPidFile(pidFile(dir, name))
		if err == nil && alive(pid, start) {
			out = append(out, fmt.Sprintf("%s (pid %d)", name, pid))
		}
	}
	return out
}

func readPidFile(path string) (pid int, start string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, "", err
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, "", fmt.Errorf("%s: empty", path)
	}
	pid, err = strconv.Atoi(fields[0])
	if err != nil || pid <= 1 {
		return 0, "", fmt.Errorf("%s: %q is not a pid", path, fields[0])
	}
	if len(fields) > 1 {
		start = fields[1]
	}
	return pid, start, nil
}

// alive reports whether pid still runs and is the process that was started at start ("" when the
// start time is unknown, and then only the pid is checked).
func alive(pid int, start string) bool {
	now, ok := startTime(pid)
	if !ok {
		return false
	}
	return start == "" || now == start
}

func stopPid(pid int, start string) error {
	if !alive(pid, start) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if waitGone(pid, start, stopTimeout) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if waitGone(pid, start, 5*time.Second) {
		return fmt.Errorf("did not stop within %v of SIGTERM and was killed", stopTimeout)
	}
	return fmt.Errorf("still running after SIGKILL")
}

func waitGone(pid int, start string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !alive(pid, start) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !alive(pid, start)
}

// tail is the last n lines of a file, for an error message.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
