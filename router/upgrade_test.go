package router_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/websocket"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

func TestWebSocket(t *testing.T) {
	var mu sync.Mutex
	var handshake http.Header
	// websocket.Server without a Handshake func accepts any Origin, as sandbox servers do
	// once the router has dropped it.
	e := newEnv(t, websocket.Server{Handler: func(c *websocket.Conn) {
		mu.Lock()
		handshake = c.Request().Header.Clone()
		mu.Unlock()
		for {
			var msg string
			if websocket.Message.Receive(c, &msg) != nil || websocket.Message.Send(c, msg) != nil {
				return
			}
		}
	}}, nil)
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(e.router.URL, "http")+"/ws", "http://router.example.com")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header = http.Header{}
	cfg.Header.Set(router.HeaderID, "sb")
	cfg.Header.Set(router.HeaderPort, e.port)
	cfg.Header.Set("Authorization", "Bearer secret")
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"hello", strings.Repeat("x", 100_000), "bye"} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil {
			t.Fatal(err)
		}
		if got != msg {
			t.Fatalf("echo of a %d-byte message came back as %d bytes", len(msg), len(got))
		}
	}
	if n := testutil.ToFloat64(e.metrics.OpenTunnels()); n != 1 {
		t.Errorf("open tunnels = %v, want 1", n)
	}
	ws.Close()
	mu.Lock()
	defer mu.Unlock()
	if v := handshake.Get("Authorization"); v != "" {
		t.Errorf("the sandbox received Authorization %q", v)
	}
	if v := handshake.Get("Origin"); v != "" {
		t.Errorf("the sandbox received Origin %q; upstream drops it on upgrades", v)
	}
	if v := handshake.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q", v)
	}
	waitFor(t, "the tunnel to close", func() bool { return testutil.ToFloat64(e.metrics.OpenTunnels()) == 0 })
	if n := testutil.ToFloat64(e.metrics.Requests().WithLabelValues("101")); n != 1 {
		t.Errorf("requests{code=101} = %v, want 1", n)
	}
}

// upgradeBackend speaks a made-up protocol: its first bytes follow the 101 in the same write,
// then it echoes upper-cased until the client half-closes, then closes.
var upgradeBackend = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "echo-test" {
		http.Error(w, "no upgrade for you", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo-test\r\n\r\nhello-from-backend\n")
	_ = brw.Flush()
	b, _ := io.ReadAll(brw)
	_, _ = conn.Write(bytes.ToUpper(b))
})

func rawUpgrade(t *testing.T, e *env, upgrade, early string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", e.router.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET /tunnel HTTP/1.1\r\nHost: router\r\nConnection: Upgrade\r\nUpgrade: " + upgrade +
		"\r\nX-Sandbox-ID: sb\r\nX-Sandbox-Port: " + e.port + "\r\n\r\n" + early
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

func TestUpgradeTunnel(t *testing.T) {
	e := newEnv(t, upgradeBackend, nil)
	// Bytes the client sends right behind its request, before the 101, must not be lost.
	conn, br, resp := rawUpgrade(t, e, "echo-test", "early-")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo-test" {
		t.Fatalf("handshake: %d %v", resp.StatusCode, resp.Header)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "hello-from-backend\n" {
		t.Fatalf("first backend bytes = %q, %v", line, err)
	}
	if _, err := io.WriteString(conn, "bytes"); err != nil {
		t.Fatal(err)
	}
	// Half-close: the backend reads to EOF, then answers; the answer must still arrive.
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "EARLY-BYTES" {
		t.Fatalf("after half-close got %q, %v; want EARLY-BYTES", rest, err)
	}
	waitFor(t, "the tunnel to close", func() bool { return testutil.ToFloat64(e.metrics.OpenTunnels()) == 0 })
}

func TestUpgradeRefusedByBackend(t *testing.T) {
	e := newEnv(t, upgradeBackend, nil)
	_, br, resp := rawUpgrade(t, e, "other-protocol", "")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
	_ = br
	if resp.StatusCode != http.StatusBadRequest || string(body) != "no upgrade for you\n" {
		t.Errorf("the backend's refusal must pass through: %d %q", resp.StatusCode, body)
	}
}

func TestUpgradeUnreachable(t *testing.T) {
	e := newEnv(t, upgradeBackend, func(o *router.Options) { o.Upstream.DialRetries = -1 })
	e.port = closedPort(t)
	_, _, resp := rawUpgrade(t, e, "echo-test", "")
	body, _ := io.ReadAll(resp.Body)
	if got := jsonError(t, resp, body); got.Status != 502 || got.Reason != router.ReasonUpstreamUnreachable {
		t.Errorf("got %+v, want 502 UpstreamUnreachable", got)
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	e := newEnv(t, upgradeBackend, nil)
	_, br, resp := rawUpgrade(t, e, "echo-test", "")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %d", resp.StatusCode)
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	e.handler.Close()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(br); done <- err }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Handler.Close left an upgraded connection open")
	}
	if n := testutil.ToFloat64(e.metrics.OpenTunnels()); n != 0 {
		t.Errorf("open tunnels = %v after Close", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
