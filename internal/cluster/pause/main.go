// Command pause is the local node's pause image and the init of the node itself: it sleeps until
// SIGTERM or SIGINT and reaps every child that is re-parented to it. As a Pod's sandbox it holds
// the Pod's namespaces, as Kubernetes' own pause does; as PID 1 of the node's PID namespace
// (internal/cluster) it reaps the containerd shims and containers that outlive their parents,
// and its death takes the whole namespace with it, which is how the node never outlives the
// process that started it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has exited, without blocking on those still running.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
