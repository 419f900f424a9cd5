package router_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// resolver is the injected Resolver of the proxy tests: it knows a fixed set of Sandboxes, all
// living on 127.0.0.1, and counts its calls. Real resolution is tested in router/resolve.
type resolver struct {
	mu       sync.Mutex
	known    map[string]bool // namespace/name
	notReady atomic.Bool
	calls    atomic.Int32
}

func newResolver(names ...string) *resolver {
	r := &resolver{known: map[string]bool{}}
	for _, n := range names {
		r.known[n] = true
	}
	return r
}

func (r *resolver) Resolve(_ context.Context, req router.Request) (router.Target, *router.Error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.known[req.Namespace+"/"+req.Name] {
		return router.Target{}, router.NotFound(router.ReasonSandboxNotFound, router.HeaderID, "no Sandbox "+req.Namespace+"/"+req.Name)
	}
	return router.Target{Namespace: req.Namespace, Name: req.Name, UID: "uid-" + req.Name,
		Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(req.Port))}, nil
}

func (r *resolver) Ready() bool { return !r.notReady.Load() }

// env is a router in front of one backend.
type env struct {
	router   *httptest.Server
	handler  *router.Handler
	backend  *httptest.Server
	port     string // the backend's port, for X-Sandbox-Port
	resolver *resolver
	metrics  *router.Metrics
	reg      *prometheus.Registry
	hits     atomic.Int32 // requests that reached the backend
}

func newEnv(t testing.TB, backend http.Handler, mod func(*router.Options)) *env {
	t.Helper()
	e := &env{resolver: newResolver("default/sb", "team-a/sb")}
	e.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(e.backend.Close)
	e.port = portOf(t, e.backend.Listener.Addr())
	e.reg = prometheus.NewRegistry()
	e.metrics = router.NewMetrics(e.reg)
	o := router.Options{
		Resolver: e.resolver,
		Metrics:  e.metrics,
		Upstream: router.UpstreamOptions{RetryDelay: 10 * time.Millisecond},
	}
	if mod != nil {
		mod(&o)
	}
	e.handler = router.New(o)
	e.router = httptest.NewServer(e.handler)
	t.Cleanup(func() { e.router.Close(); e.handler.Close() })
	return e
}

func portOf(t testing.TB, a net.Addr) string {
	t.Helper()
	_, p, err := net.SplitHostPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// request builds a request to the router for Sandbox default/sb on the backend's port.
func (e *env) request(t testing.TB, method, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, e.router.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(router.HeaderID, "sb")
	req.Header.Set(router.HeaderPort, e.port)
	return req
}

func do(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// jsonError decodes a router refusal.
func jsonError(t testing.TB, resp *http.Response, body []byte) router.Error {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, body)
	}
	var e router.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	e.Status = resp.StatusCode
	return e
}

func itoa(i int) string { return strconv.Itoa(i) }
