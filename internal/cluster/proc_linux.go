package cluster

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr makes an in-process child die with the launcher (SIGKILL when the thread that
// started it exits; Go keeps that thread unless a goroutine locked to it ends), and a detached
// child a session leader of its own, so that neither the launcher's exit nor a ^C in the terminal
// that ran `make cluster` reaches it.
func sysProcAttr(detached bool) *syscall.SysProcAttr {
	if detached {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// startTime is the start time of a running process in clock ticks since boot (field 22 of
// /proc/<pid>/stat); ok is false when no such process runs (a zombie counts as gone).
func startTime(pid int) (start string, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces; the fields after it
	// start with the state (field 3).
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return "", false
	}
	return fields[19], true
}
