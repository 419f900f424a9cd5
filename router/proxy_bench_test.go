package router_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// The benchmarks compare three paths to the same loopback backend (127.0.0.1 only): direct, a
// bare httputil.ReverseProxy (the floor: Rewrite to the backend, the same pooled transport
// settings as the router, FlushInterval -1), and the router (header parsing, resolution by an
// in-memory resolver, metrics). Loops are bounded by b.N; `make bench` fixes b.N per benchmark.

// paths starts the backend and the two proxies in front of it and returns, per path, the URL
// to call and the headers to send.
type path struct {
	name   string
	url    string
	header http.Header
}

func benchPaths(b *testing.B, backend http.Handler) []path {
	b.Helper()
	be := httptest.NewServer(backend)
	b.Cleanup(be.Close)
	beURL, _ := url.Parse(be.URL)
	_, port, _ := net.SplitHostPort(beURL.Host)

	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(beURL); pr.SetXForwarded() },
		Transport:     &http.Transport{MaxIdleConnsPerHost: router.DefaultUpstreamOptions.MaxIdleConnsPerHost, DisableCompression: true},
		FlushInterval: -1,
	})
	b.Cleanup(bare.Close)

	// The same with a buffer pool: ReverseProxy without one allocates a 32 KiB copy buffer per
	// response, which the router avoids; this floor shows what is left.
	pooled := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(beURL); pr.SetXForwarded() },
		Transport:     &http.Transport{MaxIdleConnsPerHost: router.DefaultUpstreamOptions.MaxIdleConnsPerHost, DisableCompression: true},
		FlushInterval: -1,
		BufferPool:    &pool{},
	})
	b.Cleanup(pooled.Close)

	h := router.New(router.Options{Resolver: newResolver("default/sb"), Metrics: router.NewMetrics(prometheus.NewRegistry())})
	rt := httptest.NewServer(h)
	b.Cleanup(func() { rt.Close(); h.Close() })
	routerHeader := http.Header{}
	routerHeader.Set(router.HeaderID, "sb")
	routerHeader.Set(router.HeaderPort, port)
	return []path{
		{"direct", be.URL, nil},
		{"reverseproxy", bare.URL, nil},
		{"reverseproxy-pooled", pooled.URL, nil},
		{"router", rt.URL, routerHeader},
	}
}

func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}}
}

func get(b *testing.B, c *http.Client, p path, buf []byte) int64 {
	req, err := http.NewRequest(http.MethodGet, p.url+"/bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	if p.header != nil {
		req.Header = p.header.Clone()
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: status %d, %v", p.name, resp.StatusCode, err)
	}
	return n
}

var small = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"stdout":"hello\n","exit_code":0}`)
})

// BenchmarkLatency sends requests at 1,000 per second from one keep-alive client and reports
// the p50 and p99 latency of each path; the router's added latency is its figure minus direct.
func BenchmarkLatency(b *testing.B) {
	for _, p := range benchPaths(b, small) {
		b.Run(p.name, func(b *testing.B) {
			c := benchClient(1)
			buf := make([]byte, 32<<10)
			get(b, c, p, buf) // connect outside the measurement
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			next := time.Now()
			for range b.N {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(time.Millisecond)
				start := time.Now()
				get(b, c, p, buf)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkThroughput runs 64 concurrent keep-alive clients and reports requests per second.
func BenchmarkThroughput(b *testing.B) {
	const clients = 64
	for _, p := range benchPaths(b, small) {
		b.Run(p.name, func(b *testing.B) {
			c := benchClient(clients)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					buf := make([]byte, 32<<10)
					for next.Add(1) <= int64(b.N) {
						get(b, c, p, buf)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// BenchmarkStream streams a 100 MB response (written in 32 KiB chunks) per iteration.
func BenchmarkStream(b *testing.B) {
	const size = 100 << 20
	chunk := make([]byte, 32<<10)
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	for _, p := range benchPaths(b, stream) {
		b.Run(p.name, func(b *testing.B) {
			c := benchClient(1)
			buf := make([]byte, 32<<10)
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				if n := get(b, c, p, buf); n != size {
					b.Fatalf("%s: %d bytes, want %d", p.name, n, size)
				}
			}
		})
	}
}

type pool struct{ p sync.Pool }

func (p *pool) Get() []byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *pool) Put(b []byte) { p.p.Put(&b) }
