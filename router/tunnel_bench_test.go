package router_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/websocket"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// BenchmarkIdleWebSockets opens idle WebSocket connections through a proxy and reports the
// proxy's memory per connection: Go heap and stacks in use, and resident set size, after a GC,
// minus the same before. The WebSocket clients and the backend run in a child process (this
// test binary, see TestIdleWebSocketHelper), so this process holds only the proxy: two sockets
// per connection. 10,000 connections unless the open-file limit is lower (each process here
// needs two descriptors per connection); the figure per connection is what counts.
func BenchmarkIdleWebSockets(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	conns := 10_000
	if max := int(lim.Cur-200) / 2; max < conns {
		conns = max - max%500
	}
	if s := os.Getenv("SANDBOX_ROUTER_BENCH_CONNS"); s != "" {
		conns, _ = strconv.Atoi(s)
	}
	for _, name := range []string{"reverseproxy", "router"} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				heap, rss := idleWebSockets(b, name, conns)
				b.ReportMetric(float64(conns), "conns")
				b.ReportMetric(heap/1024, "heap+stack-KiB/conn")
				b.ReportMetric(rss/1024, "rss-KiB/conn")
			}
		})
	}
}

func idleWebSockets(b *testing.B, proxy string, conns int) (heapPerConn, rssPerConn float64) {
	b.StopTimer()
	defer b.StartTimer()
	helper := exec.Command(os.Args[0], "-test.run=^TestIdleWebSocketHelper$", "-test.v=false")
	helper.Env = append(os.Environ(), "SANDBOX_ROUTER_BENCH_HELPER=1", "SANDBOX_ROUTER_BENCH_CONNS="+strconv.Itoa(conns))
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = helper.Wait() }()
	out := bufio.NewReader(stdout)
	line := func() string {
		s, err := out.ReadString('\n')
		if err != nil {
			b.Fatalf("helper: %v", err)
		}
		return strings.TrimSpace(s)
	}
	backend := line() // "127.0.0.1:port"
	var h http.Handler
	var closeH func()
	switch proxy {
	case "router":
		rh := router.New(router.Options{Resolver: newResolver("default/sb"), Metrics: router.NewMetrics(prometheus.NewRegistry())})
		h, closeH = rh, rh.Close
	default:
		u, _ := url.Parse("http://" + backend)
		h = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
		closeH = func() {}
	}
	srv := httptest.NewServer(h)
	defer func() { srv.Close(); closeH() }()

	heap0, rss0 := memory()
	_, port, _ := net.SplitHostPort(backend)
	fmt.Fprintf(stdin, "%s %s\n", srv.Listener.Addr(), port)
	if got := line(); got != "open" {
		b.Fatalf("helper: %s", got)
	}
	heap1, rss1 := memory()
	return (heap1 - heap0) / float64(conns), (rss1 - rss0) / float64(conns)
}

func memory() (heap, rss float64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	data, _ := os.ReadFile("/proc/self/statm")
	var pages, resident float64
	fmt.Sscan(string(data), &pages, &resident)
	return float64(m.HeapInuse + m.StackInuse), resident * float64(os.Getpagesize())
}

// TestIdleWebSocketHelper is the child process of BenchmarkIdleWebSockets: a WebSocket echo
// backend and the clients. It prints the backend address, reads the proxy address and backend
// port, opens the connections through the proxy (one echo each, to prove the tunnel), prints
// "open", and holds them idle until its stdin closes.
func TestIdleWebSocketHelper(t *testing.T) {
	if os.Getenv("SANDBOX_ROUTER_BENCH_HELPER") != "1" {
		t.Skip("the child process of BenchmarkIdleWebSockets")
	}
	conns, _ := strconv.Atoi(os.Getenv("SANDBOX_ROUTER_BENCH_CONNS"))
	backend := httptest.NewUnstartedServer(websocket.Server{Handler: func(c *websocket.Conn) { _, _ = io.Copy(c, c) }})
	backend.Config.ConnState = nil
	backend.Start()
	defer backend.Close()
	fmt.Println(backend.Listener.Addr().String())
	in := bufio.NewReader(os.Stdin)
	var proxyAddr, port string
	if _, err := fmt.Fscanln(in, &proxyAddr, &port); err != nil {
		t.Fatal(err)
	}
	ws := make([]*websocket.Conn, conns)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 32)
	for i := range conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cfg, _ := websocket.NewConfig("ws://"+proxyAddr+"/ws", "http://bench")
			cfg.Header = http.Header{router.HeaderID: {"sb"}, http.CanonicalHeaderKey(router.HeaderPort): {port}}
			cfg.Dialer = &net.Dialer{Timeout: 30 * time.Second}
			c, err := websocket.DialConfig(cfg)
			if err == nil {
				var reply string
				if err = websocket.Message.Send(c, "ping"); err == nil {
					err = websocket.Message.Receive(c, &reply)
				}
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("connection %d: %w", i, err)
				}
				mu.Unlock()
				return
			}
			ws[i] = c
		})
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Println("error:", firstErr)
		return
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, in) // until the benchmark closes stdin
	for _, c := range ws {
		c.Close()
	}
}
