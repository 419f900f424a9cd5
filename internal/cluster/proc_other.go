//go:build unix && !linux

package cluster

import (
	"syscall"
)

// sysProcAttr puts a detached child in a session of its own. Outside Linux there is no parent-death
// signal, so an in-process child outlives a launcher that dies without calling Stop.
func sysProcAttr(detached bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: detached}
}

// startTime cannot tell a recycled pid outside Linux; it only checks that the pid runs.
func startTime(pid int) (string, bool) {
	return "", syscall.Kill(pid, 0) == nil
}
