package router_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// echo answers with what it received, as JSON-free lines a test can compare.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "method=%s\nuri=%s\nhost=%s\nbody=%s\n", r.Method, r.RequestURI, r.Host, body)
	for _, k := range []string{"Authorization", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Sandbox-Id", "X-Custom", "Keep-Alive", "X-Hop", "Accept-Encoding"} {
		fmt.Fprintf(w, "%s=%s\n", k, strings.Join(r.Header.Values(k), ","))
	}
})

func TestForwardsRequest(t *testing.T) {
	e := newEnv(t, echo, nil)
	req := e.request(t, http.MethodPost, "/api/run%2Fx?q=1&q=2", strings.NewReader("print(1)"))
	req.Host = "router.example.com"
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Forwarded-Host", "evil.example.com")
	req.Header.Set("X-Custom", "kept")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := strings.Join([]string{
		"method=POST",
		"uri=/api/run%2Fx?q=1&q=2", // path escaping and query kept byte for byte
		"host=127.0.0.1:" + e.port, // inbound Host stripped: the Pod sees its own address
		"body=print(1)",
		"Authorization=",            // the caller's credential never reaches the sandbox
		"X-Forwarded-For=127.0.0.1", // spoofed value replaced by the real peer
		"X-Forwarded-Host=router.example.com",
		"X-Forwarded-Proto=http",
		"X-Sandbox-Id=sb", // routing headers pass through, as upstream
		"X-Custom=kept",
		"Keep-Alive=",
		"X-Hop=",               // named in Connection: hop-by-hop
		"Accept-Encoding=gzip", // Go's client sent it; the router adds and strips nothing
		"",
	}, "\n")
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("what the sandbox received (-want +got):\n%s", diff)
	}
	// The router counts a request when its handler returns, which can be just after the client
	// has read the whole response.
	waitFor(t, "the request to be counted", func() bool { return testutil.ToFloat64(e.metrics.Requests().WithLabelValues("200")) >= 1 })
	if got := testutil.ToFloat64(e.metrics.Requests().WithLabelValues("200")); got != 1 {
		t.Errorf("sandbox_router_requests_total{code=200} = %v, want 1", got)
	}
}

func TestRefusals(t *testing.T) {
	cases := map[string]struct {
		reason   string
		headers  map[string]string
		notReady bool
		want     router.Error
	}{
		"invalid id": {
			reason:  "a malformed header is a 400 naming it",
			headers: map[string]string{"X-Sandbox-ID": "a.b"},
			want:    router.Error{Status: 400, Reason: "InvalidHeader", Header: "X-Sandbox-ID"},
		},
		"unknown sandbox": {
			reason:  "a name the resolver does not know is a 404, never a guess",
			headers: map[string]string{"X-Sandbox-ID": "kubernetes", "X-Sandbox-Namespace": "default"},
			want:    router.Error{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"},
		},
		"cache not synced": {
			reason:   "before the cache syncs nothing is resolved",
			headers:  map[string]string{"X-Sandbox-ID": "sb"},
			notReady: true,
			want:     router.Error{Status: 503, Reason: "RouterNotReady"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, echo, nil)
			e.resolver.notReady.Store(tc.notReady)
			req := e.request(t, http.MethodGet, "/", nil)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, body := do(t, req)
			got := jsonError(t, resp, body)
			got.Detail = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if n := e.hits.Load(); n != 0 {
				t.Errorf("%s: %d requests reached the sandbox", tc.reason, n)
			}
			if got := testutil.ToFloat64(e.metrics.Refusals().WithLabelValues(tc.want.Reason)); got != 1 {
				t.Errorf("sandbox_router_refusals_total{reason=%s} = %v, want 1", tc.want.Reason, got)
			}
		})
	}
}

// denyAll is an injected Authorizer; the real one is tested against an API server in
// router/authz.
type denyAll struct{ calls int }

func (d *denyAll) Authorize(context.Context, *http.Request, router.Request) *router.Error {
	d.calls++
	return &router.Error{Status: 403, Reason: router.ReasonForbidden, Header: router.HeaderAuthorization, Detail: "no"}
}

func TestAuthorizerRunsBeforeResolution(t *testing.T) {
	d := &denyAll{}
	e := newEnv(t, echo, func(o *router.Options) { o.Authorizer = d })
	resp, body := do(t, e.request(t, http.MethodGet, "/", nil))
	if got := jsonError(t, resp, body); got.Status != 403 || got.Reason != router.ReasonForbidden {
		t.Errorf("refusal = %+v, want 403 Forbidden", got)
	}
	if d.calls != 1 || e.resolver.calls.Load() != 0 || e.hits.Load() != 0 {
		t.Errorf("authorizer calls %d, resolver calls %d, backend hits %d; want 1, 0, 0: a caller who may not reach a Sandbox must not learn whether it exists",
			d.calls, e.resolver.calls.Load(), e.hits.Load())
	}
}

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, echo, nil)
	get := func(path string, withID bool) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, e.router.URL+path, nil)
		if withID {
			req.Header.Set(router.HeaderID, "sb")
			req.Header.Set(router.HeaderPort, e.port)
		}
		resp, body := do(t, req)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz", false); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := get("/readyz", false); code != 200 {
		t.Errorf("/readyz = %d, want 200", code)
	}
	e.resolver.notReady.Store(true)
	if code, _ := get("/readyz", false); code != 503 {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	e.resolver.notReady.Store(false)
	e.handler.Drain()
	if code, _ := get("/readyz", false); code != 503 {
		t.Errorf("/readyz while draining = %d, want 503", code)
	}
	if code, _ := get("/healthz", false); code != 200 {
		t.Errorf("/healthz while draining = %d, want 200", code)
	}
	if code, body := get("/healthz", true); code != 200 || !strings.HasPrefix(body, "method=GET\nuri=/healthz\n") {
		t.Errorf("a sandbox's own /healthz must be proxied: %d %q", code, body)
	}
}

// TestStreaming: each event must reach the client before the sandbox writes the next one; the
// sandbox waits for the client's acknowledgement, so a buffering proxy deadlocks and fails.
func TestStreaming(t *testing.T) {
	for _, kind := range []string{"sse", "chunked"} {
		t.Run(kind, func(t *testing.T) {
			ack := make(chan struct{})
			e := newEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if kind == "sse" {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				w.WriteHeader(200)
				for i := range 3 {
					fmt.Fprintf(w, "data: event %d\n\n", i)
					w.(http.Flusher).Flush()
					select {
					case <-ack:
					case <-r.Context().Done():
						return
					}
				}
			}), nil)
			resp, err := http.DefaultClient.Do(e.request(t, http.MethodGet, "/events", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if kind == "chunked" && len(resp.TransferEncoding) == 0 {
				t.Errorf("TransferEncoding = %v, want chunked", resp.TransferEncoding)
			}
			br := bufio.NewReader(resp.Body)
			for i := range 3 {
				line := make(chan string, 1)
				go func() { s, _ := br.ReadString('\n'); _, _ = br.ReadString('\n'); line <- s }()
				select {
				case s := <-line:
					if want := fmt.Sprintf("data: event %d\n", i); s != want {
						t.Fatalf("event %d = %q, want %q", i, s, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("event %d did not arrive while the sandbox waited: the router buffers", i)
				}
				ack <- struct{}{}
			}
		})
	}
}

func TestUpstreamErrors(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	cases := map[string]struct {
		reason     string
		opts       func(*router.Options)
		port       func(e *env) string
		want       router.Error
		wantMetric string
	}{
		"connection refused": {
			reason:     "nothing listens on the port: retried, then a 502",
			port:       func(*env) string { return closedPort(t) },
			want:       router.Error{Status: 502, Reason: router.ReasonUpstreamUnreachable},
			wantMetric: "connection_refused",
		},
		"proxy timeout": {
			reason:     "the sandbox does not answer within --proxy-timeout",
			opts:       func(o *router.Options) { o.ProxyTimeout = 100 * time.Millisecond },
			want:       router.Error{Status: 504, Reason: router.ReasonUpstreamTimeout},
			wantMetric: "timeout",
		},
		"response header timeout": {
			reason:     "--response-header-timeout",
			opts:       func(o *router.Options) { o.Upstream.ResponseHeaderTimeout = 100 * time.Millisecond },
			want:       router.Error{Status: 504, Reason: router.ReasonUpstreamTimeout},
			wantMetric: "timeout",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, slow, tc.opts)
			req := e.request(t, http.MethodGet, "/", nil)
			if tc.port != nil {
				req.Header.Set(router.HeaderPort, tc.port(e))
			}
			resp, body := do(t, req)
			got := jsonError(t, resp, body)
			if !strings.Contains(got.Detail, "Sandbox default/sb") {
				t.Errorf("detail %q does not name the Sandbox", got.Detail)
			}
			got.Detail = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if n := testutil.ToFloat64(e.metrics.UpstreamErrors().WithLabelValues(tc.wantMetric)); n != 1 {
				t.Errorf("sandbox_router_upstream_errors_total{reason=%s} = %v, want 1", tc.wantMetric, n)
			}
		})
	}
}

func TestDialRetries(t *testing.T) {
	// The Pod starts listening only after the first attempts failed: the retries (10 ms, 20 ms,
	// 40 ms, ...) carry the request through.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newEnv(t, echo, func(o *router.Options) {
		o.Upstream.DialRetries = 6
		o.Upstream.RetryDelay = 10 * time.Millisecond
	})
	started := make(chan struct{})
	go func() {
		// Wait until the router has failed at least once, then listen.
		for testutil.ToFloat64(e.metrics.DialRetries()) < 1 {
			time.Sleep(time.Millisecond)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			close(started)
			return
		}
		srv := &http.Server{Handler: echo}
		t.Cleanup(func() { srv.Close() })
		close(started)
		_ = srv.Serve(l)
	}()
	req := e.request(t, http.MethodGet, "/late", nil)
	req.Header.Set(router.HeaderPort, portOf(t, ln.Addr()))
	resp, body := do(t, req)
	<-started
	if resp.StatusCode != 200 || !strings.Contains(string(body), "uri=/late") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if n := testutil.ToFloat64(e.metrics.DialRetries()); n < 1 {
		t.Errorf("dial retries = %v, want at least 1", n)
	}

	// With retries off, the same refusal is a 502 at once.
	e2 := newEnv(t, echo, func(o *router.Options) { o.Upstream.DialRetries = -1 })
	req = e2.request(t, http.MethodGet, "/", nil)
	req.Header.Set(router.HeaderPort, closedPort(t))
	resp, _ = do(t, req)
	if resp.StatusCode != 502 || testutil.ToFloat64(e2.metrics.DialRetries()) != 0 {
		t.Errorf("without retries: status %d, retries %v; want 502, 0", resp.StatusCode, testutil.ToFloat64(e2.metrics.DialRetries()))
	}
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := portOf(t, ln.Addr())
	ln.Close()
	return p
}

func TestH2C(t *testing.T) {
	e := newEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend saw %s", r.Proto)
	}), nil)
	srv := httptest.NewUnstartedServer(e.handler)
	srv.Config = router.NewServer("", e.handler)
	srv.Start()
	defer srv.Close()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	req := e.request(t, http.MethodGet, "/", nil)
	req.URL.Host = srv.Listener.Addr().String()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Proto != "HTTP/2.0" || string(body) != "backend saw HTTP/1.1" {
		t.Errorf("client %s, %q; want HTTP/2.0 to the router and HTTP/1.1 to the Pod", resp.Proto, body)
	}
}
