// Package deathsig makes the processes a test binary starts die with it, however it ends: a
// failed setup, a panic, go test's -timeout (whose panic runs no deferred function) or SIGKILL,
// after which nothing of the test binary can clean up.
//
// On Linux the kernel does it: a process can ask for SIGKILL when its parent dies
// (PR_SET_PDEATHSIG), and keeps that request across execve. os/exec sets it through
// SysProcAttr.Pdeathsig (Start); envtest starts kube-apiserver and etcd itself and offers no hook
// for their SysProcAttr, so Wrap gives it paths that are symlinks to the test binary. Started
// under such a name, the test binary, in this package's init and before anything of the test
// runs, sets the signal and execs the real binary in its place (same pid, same process group,
// so envtest stops it as before).
//
// The kernel sends the signal when the *thread* that forked the child ends, not the process. Go
// ends a thread only when a goroutine locked to it returns, which a test or a library may do, so
// every start runs through Do on one goroutine that stays locked to its thread while the test
// binary lives.
package deathsig

import (
	"os/exec"
	"runtime"
	"sync"
)

var (
	startOnce sync.Once
	work      chan func()
)

// Do runs f on the thread that starts every child process, and returns its error. Anything
// that may fork a process whose death is tied to this one (envtest's Start, an API server's
// restart) runs through Do.
func Do(f func() error) error {
	startOnce.Do(func() {
		work = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for w := range work {
				w()
			}
		}()
	})
	var err error
	done := make(chan struct{})
	work <- func() {
		defer close(done)
		err = f()
	}
	<-done
	return err
}

// Start starts cmd so that it is killed when the test binary ends (on Linux), from the thread
// Do runs on.
func Start(cmd *exec.Cmd) error {
	setPdeathsig(cmd)
	return Do(cmd.Start)
}
