package router

import (
	"net"
	"syscall"
)

// waitReadable blocks until c has bytes to read, or EOF or an error to report, without a read
// buffer: it peeks one byte with MSG_PEEK inside the runtime poller's wait. Connections that are
// not plain sockets (TLS) return at once, and the caller's Read waits instead.
func waitReadable(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc.Read(peek)
}

func peek(fd uintptr) bool {
	var b [1]byte
	for {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for the poller
		default:
			return true // data, EOF or an error: the Read that follows reports it
		}
	}
}
