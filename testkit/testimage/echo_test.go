package testimage

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServeTCPEcho(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeTCPEcho(ctx, ln) }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	var got []string
	for _, line := range []string{"one\n", "two words\n", "\n"} {
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if diff := cmp.Diff([]string{"one\n", "two words\n", "\n"}, got); diff != "" {
		t.Errorf("each line comes back as it is sent (-want +got):\n%s", diff)
	}

	// Half-close: what was sent comes back, then EOF.
	if _, err := io.WriteString(conn, "no newline"); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "no newline" {
		t.Errorf("after half-close: %q, %v; want the unterminated bytes then EOF", rest, err)
	}

	// An idle connection is closed when the server stops.
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(idle, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeTCPEcho = %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeTCPEcho still runs 10s after its context ended")
	}
	_ = idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection read %d bytes, %v; want EOF once the server stopped", n, err)
	}
}

func TestServeUDPEcho(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeUDPEcho(ctx, pc) }()

	conn, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var got []string
	sent := []string{"ping", "a longer datagram", string(make([]byte, 1400))}
	for _, d := range sent {
		if _, err := conn.Write([]byte(d)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 2048)
		n, err := conn.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b[:n]))
	}
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("each datagram comes back unchanged (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeUDPEcho = %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeUDPEcho still runs 10s after its context ended")
	}
}
