package testimage

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// echoIdleTimeout ends a TCP echo connection nobody uses, so forgotten test clients cannot pile up
// in a Pod that lives for the whole suite.
const echoIdleTimeout = 5 * time.Minute

// ServeTCPEcho echoes every byte each connection sends back to it, as it arrives, so a line (or
// anything /dial sends) comes straight back: a plain TCP target for dataplane tests that answers.
// It returns nil once ctx ends, having closed ln and every connection, or the listener's error.
func ServeTCPEcho(ctx context.Context, ln net.Listener) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				continue
			}
			return err
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			c.Close()
			return nil
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			echoConn(c)
		})
	}
}

func echoConn(c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		_ = c.SetDeadline(time.Now().Add(echoIdleTimeout))
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				// The client half-closed: everything it sent has been echoed.
				if tc, ok := c.(interface{ CloseWrite() error }); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// ServeUDPEcho sends every datagram back to its sender unchanged: the UDP target /dial?proto=udp
// expects an answer from. It returns nil once ctx ends, having closed pc, or the socket's error.
func ServeUDPEcho(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				continue
			}
			return err
		}
		// A failed reply (the sender went away, ICMP unreachable) concerns that sender only.
		_, _ = pc.WriteTo(buf[:n], from)
	}
}
