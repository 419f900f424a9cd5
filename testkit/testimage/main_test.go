package testimage

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePort returns a 127.0.0.1 port free a moment ago, for a child process to bind.
func freePort(t *testing.T, network string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(closedPort(t, network))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestSandboxTestserver builds the image's program as the image does (CGO_ENABLED=0), runs it on
// loopback, uses its HTTP, WebSocket, SSE and echo servers, and stops it with SIGTERM as the
// kubelet does: it must end its open sessions and exit 0 within 5 s.
func TestSandboxTestserver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs sandbox-testserver; skipped in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH to build sandbox-testserver")
	}
	bin := filepath.Join(t.TempDir(), "sandbox-testserver")
	build := exec.Command(goBin, "build", "-o", bin, "./sandbox-testserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if info, err := buildinfo.ReadFile(bin); err != nil {
		t.Fatal(err)
	} else {
		var cgo string
		for _, s := range info.Settings {
			if s.Key == "CGO_ENABLED" {
				cgo = s.Value
			}
		}
		if cgo != "0" {
			t.Errorf("the binary was built with CGO_ENABLED=%q; the image has no libc", cgo)
		}
	}

	// An invalid environment is exit status 2, naming the variable, before anything listens.
	bad := exec.Command(bin)
	bad.Env = append(os.Environ(), "PORT=http")
	out, err := bad.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 {
		t.Errorf("with PORT=http: %v, want exit status 2", err)
	}
	if want := `PORT: Invalid value: "http"`; !strings.Contains(string(out), want) {
		t.Errorf("with PORT=http the output lacks %q:\n%s", want, out)
	}

	httpPort, tcpPort, udpPort := freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "udp")
	var stderr lockedBuffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LISTEN_HOST=127.0.0.1", "PORT="+httpPort, "TCP_ECHO_PORT="+tcpPort,
		"UDP_ECHO_PORT="+udpPort, "POD_NAME=testimage-0", "POD_NAMESPACE=team-a", "DATA_DIR="+t.TempDir())
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the process is reaped, with its status in waitErr.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("sandbox-testserver's stderr:\n%s", stderr.String())
		}
	})

	base := "http://127.0.0.1:" + httpPort
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 10s: %v", err)
		}
		select {
		case <-exited:
			t.Fatalf("sandbox-testserver exited at start: %v", waitErr)
		case <-time.After(50 * time.Millisecond):
		}
	}

	if diff := cmp.Diff(Echo{Pod: "testimage-0", Namespace: "team-a", Method: "GET", Path: "/x"}, decode[Echo](t, get(t, base+"/x"))); diff != "" {
		t.Errorf("/x (-want +got):\n%s", diff)
	}
	for _, proto := range []string{"tcp", "udp"} {
		port := tcpPort
		if proto == "udp" {
			port = udpPort
		}
		q := url.Values{"proto": {proto}, "addr": {"127.0.0.1:" + port}, "send": {"echo me"}}
		res := decode[DialResult](t, get(t, base+"/dial?"+q.Encode()))
		if !res.OK || res.Reply != "echo me" {
			t.Errorf("the %s echo server through /dial: %+v", proto, res)
		}
	}

	// A WebSocket session and an SSE stream are open when the signal comes.
	ws := dialWS(t, base+"/ws", nil)
	if err := ws.WriteText("before"); err != nil {
		t.Fatal(err)
	}
	if got, err := ws.ReadText(); err != nil || got != "before" {
		t.Fatalf("ws echo = %q, %v", got, err)
	}
	resp, err := http.Get(base + "/sse?n=1000&interval=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sse := bufio.NewReader(resp.Body)
	if ev, ok := readEvent(t, sse); !ok || ev.Data != "1 testimage-0" {
		t.Fatalf("first SSE event = %+v, %v", ev, ok)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("sandbox-testserver exited with %v after SIGTERM, want status 0", waitErr)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("sandbox-testserver still runs 5s after SIGTERM")
	}
	if _, err := ws.ReadText(); !isGoingAway(err) {
		t.Errorf("the WebSocket session ended with %v, want a close with %d", err, CloseGoingAway)
	}
	if ev, ok := readEvent(t, sse); ok {
		t.Errorf("an SSE event after shutdown: %+v", ev)
	}
	logs := stderr.String()
	for _, want := range []string{`GET "/healthz" 200`, `GET "/ws" 101`, "signal received"} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

func isGoingAway(err error) bool {
	ce, ok := errors.AsType[*CloseError](err)
	return ok && ce.Code == CloseGoingAway
}
