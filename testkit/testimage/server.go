// Package testimage is the program of the project's test image: a small HTTP server that runs as
// a container in a real Kubernetes node so end-to-end tests can prove what reaches a Pod through
// the sandbox router, and what a Pod can reach past its NetworkPolicies. Every endpoint answers a
// question a test asks from outside (who answered, which headers arrived, did a dial or a DNS
// lookup from inside the Pod succeed) as JSON, so a test needs nothing but an HTTP client and the
// types of this package; WSConn is the WebSocket client those tests use through the router.
//
// The handler is built from Config alone and holds no state beyond the files it writes, so it is
// tested with httptest; the command in ./sandbox-testserver adds the listeners, logging and signal handling.
package testimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Config is what the handler needs to know about the Pod it runs in.
type Config struct {
	// PodName is reported by "/" and in every SSE event, so a test knows which replica answered.
	PodName string
	// Namespace is reported by "/".
	Namespace string
	// DataDir is where /files/<name> reads and writes; a test mounts a volume there to prove it
	// persists. Empty disables /files (503).
	DataDir string
}

// resolvConfPath is the file GET /resolv.conf serves: the Pod's DNS configuration as the kubelet
// wrote it, so a test can check dnsPolicy and dnsConfig without sending a packet.
const resolvConfPath = "/etc/resolv.conf"

// NewHandler returns the test server's HTTP handler. Paths it does not know answer like "/",
// because the router forwards arbitrary paths and a test wants to see which one arrived.
func NewHandler(cfg Config) http.Handler {
	return &handler{cfg: cfg}
}

// handler holds no state but its Config: files live in DataDir, and each PUT replaces its file
// with one rename, so concurrent requests need no lock (the last rename wins).
type handler struct {
	cfg Config
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/healthz":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok")
		}
	case p == "/ws":
		if allow(w, r, http.MethodGet) {
			serveWebSocketEcho(w, r)
		}
	case p == "/sse":
		if allow(w, r, http.MethodGet) {
			h.serveSSE(w, r)
		}
	case p == "/dial":
		if allow(w, r, http.MethodGet) {
			serveDial(w, r)
		}
	case p == "/dns":
		if allow(w, r, http.MethodGet) {
			serveDNS(w, r)
		}
	case p == "/resolv.conf":
		if allow(w, r, http.MethodGet, http.MethodHead) {
			serveResolvConf(w)
		}
	case p == "/env":
		if allow(w, r, http.MethodGet) {
			serveEnv(w, r)
		}
	case strings.HasPrefix(p, "/files/"):
		h.serveFiles(w, r, strings.TrimPrefix(p, "/files/"))
	default:
		h.serveEcho(w, r)
	}
}

// Echo is the answer of "/" and of every unknown path: who answered and what arrived.
type Echo struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	// Query is the raw query string, so a test can check the router forwards it untouched.
	Query   string      `json:"query"`
	Headers EchoHeaders `json:"headers"`
}

// EchoHeaders are the request headers a router test asserts on; an absent header reads as "", and
// one sent several times as its values joined with ", ". Authorization is reported only as present
// or not: the router must strip it, and the test image must never echo a credential.
type EchoHeaders struct {
	SandboxID     string `json:"X-Sandbox-ID"`
	ForwardedFor  string `json:"X-Forwarded-For"`
	ForwardedHost string `json:"X-Forwarded-Host"`
	Authorization bool   `json:"Authorization"`
}

func (h *handler) serveEcho(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Echo{
		Pod:       h.cfg.PodName,
		Namespace: h.cfg.Namespace,
		Method:    r.Method,
		Path:      r.URL.Path,
		Query:     r.URL.RawQuery,
		Headers: EchoHeaders{
			SandboxID:     joined(r.Header, "X-Sandbox-ID"),
			ForwardedFor:  joined(r.Header, "X-Forwarded-For"),
			ForwardedHost: joined(r.Header, "X-Forwarded-Host"),
			Authorization: len(r.Header.Values("Authorization")) > 0,
		},
	})
}

// joined reports every value of a header, so a header sent twice (which a proxy must not do to
// X-Forwarded-For) shows as two values rather than the first one alone.
func joined(h http.Header, key string) string {
	return strings.Join(h.Values(key), ", ")
}

func serveResolvConf(w http.ResponseWriter) {
	b, err := os.ReadFile(resolvConfPath)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("reading %s: %v", resolvConfPath, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

// EnvResult is the answer of GET /env.
type EnvResult struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func serveEnv(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		writeError(w, http.StatusBadRequest, requiredParam("name").Error())
		return
	}
	writeJSON(w, http.StatusOK, EnvResult{Name: name, Value: os.Getenv(name)})
}

// ErrorBody is the JSON body of every refusal, with a 4xx or 5xx status.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the types of this package are written, and all of them marshal.
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// allow answers 405 with an Allow header unless the request uses one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	return false
}

// LogRequests writes one line per request to out once the handler returns: the method, path,
// status, bytes written, duration and remote address. A WebSocket session logs 101 when it ends,
// and an SSE stream when its last event is sent, so a line's duration is the whole exchange.
func LogRequests(next http.Handler, out io.Writer) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s %q %d %dB %s %s\n", start.UTC().Format(time.RFC3339Nano), r.Method,
			r.URL.RequestURI(), status, rec.bytes, time.Since(start).Round(time.Microsecond), r.RemoteAddr)
	})
}

// recorder notes the status and size of a response. It implements Hijack itself (to note the 101
// it cannot see) and Unwrap (so http.ResponseController still finds Flush underneath).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack hands the connection to a WebSocket session and records its 101, which the handler
// writes on the raw connection where the recorder cannot see it.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.status = http.StatusSwitchingProtocols
	}
	return c, brw, err
}
