package router

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure a Handler.
type Options struct {
	// Resolver chooses targets; required.
	Resolver Resolver
	// Authorizer checks callers; nil lets every caller through, as upstream does.
	Authorizer Authorizer
	// Upstream are the connection settings towards Pods.
	Upstream UpstreamOptions
	// ProxyTimeout bounds a whole proxied request, response body included (upstream: 180 s);
	// upgraded connections are not bounded. 0 means no bound.
	ProxyTimeout time.Duration
	// Metrics records requests; nil records nothing.
	Metrics *Metrics
	// Log receives upstream failures; nil discards them.
	Log *slog.Logger
}

// DefaultProxyTimeout is upstream's default proxy timeout.
const DefaultProxyTimeout = 180 * time.Second

// Handler is the router's http.Handler: parse the headers, authorise, resolve, then proxy.
// Requests without X-Sandbox-ID to /healthz and /readyz are answered by the router itself.
type Handler struct {
	resolver   Resolver
	authorizer Authorizer
	timeout    time.Duration
	metrics    *Metrics
	log        *slog.Logger
	dialer     *dialer
	transport  *http.Transport
	proxy      *httputil.ReverseProxy

	draining atomic.Bool

	mu      sync.Mutex
	tunnels map[*tunnel]struct{}
	closed  bool
}

// Drain makes /readyz fail from now on, so load balancers stop sending new requests while those
// in flight finish; the command calls it on SIGTERM, before shutting the server down.
func (h *Handler) Drain() { h.draining.Store(true) }

// New returns a Handler.
func New(o Options) *Handler {
	if o.Resolver == nil {
		panic("router.New: Options.Resolver is required")
	}
	up := o.Upstream.withDefaults()
	h := &Handler{
		resolver:   o.Resolver,
		authorizer: o.Authorizer,
		timeout:    o.ProxyTimeout,
		metrics:    o.Metrics,
		log:        o.Log,
		tunnels:    map[*tunnel]struct{}{},
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.dialer = &dialer{
		Dialer:  netDialer(up.DialTimeout),
		retries: up.DialRetries,
		delay:   up.RetryDelay,
		onRetry: h.metrics.retried,
	}
	h.transport = newTransport(up, h.dialer)
	h.proxy = &httputil.ReverseProxy{
		Rewrite:       rewrite,
		Transport:     h.transport,
		FlushInterval: -1, // SSE and chunked output reach the client as the Pod writes them
		ErrorHandler:  h.upstreamFailed,
		BufferPool:    bufferPool{},
	}
	return h
}

type targetKey struct{}

// rewrite points the outbound request at the resolved Pod. httputil.ReverseProxy has already
// removed hop-by-hop headers and inbound X-Forwarded-*, so a caller cannot spoof them.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*Target)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = t.Addr.String()
	pr.Out.Host = "" // the Pod sees its own address, as with upstream
	// The router consumes the caller's credential; a sandbox must never be able to replay it.
	pr.Out.Header.Del(HeaderAuthorization)
	pr.SetXForwarded()
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if len(r.Header[http.CanonicalHeaderKey(HeaderID)]) == 0 {
		switch r.URL.Path {
		case "/healthz":
			h.probe(w, true)
			return
		case "/readyz":
			h.probe(w, h.resolver.Ready() && !h.draining.Load())
			return
		}
	}
	req, perr := ParseHeaders(r.Header)
	if perr != nil {
		h.refuse(w, perr, start)
		return
	}
	if h.authorizer != nil {
		if aerr := h.authorizer.Authorize(r.Context(), r, req); aerr != nil {
			h.refuse(w, aerr, start)
			return
		}
	}
	if !h.resolver.Ready() {
		h.refuse(w, &Error{Status: http.StatusServiceUnavailable, Reason: ReasonRouterNotReady,
			Detail: "the router's Sandbox cache has not synced yet; retry shortly"}, start)
		return
	}
	t, rerr := h.resolver.Resolve(r.Context(), req)
	if rerr != nil {
		h.refuse(w, rerr, start)
		return
	}
	if isUpgrade(r) {
		h.serveUpgrade(w, r, &t, start)
		return
	}
	ctx, cancel := h.bounded(context.WithValue(r.Context(), targetKey{}, &t))
	defer cancel()
	sw := &statusWriter{ResponseWriter: w}
	h.proxy.ServeHTTP(sw, r.WithContext(ctx))
	h.metrics.observe(sw.status(), time.Since(start).Seconds())
}

// bounded is ctx bounded by the ProxyTimeout, if there is one: a proxied request as a whole, and
// an upgrade's handshake (not the tunnel after it).
func (h *Handler) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.timeout > 0 {
		return context.WithTimeout(ctx, h.timeout)
	}
	return ctx, func() {}
}

func (h *Handler) probe(w http.ResponseWriter, ok bool) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: the Sandbox cache has not synced, or the router is shutting down\n")
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (h *Handler) refuse(w http.ResponseWriter, e *Error, start time.Time) {
	// Counted before the client can see the refusal; the request's own count and duration
	// include the write.
	h.metrics.refused(e.Reason)
	e.Write(w)
	h.metrics.observe(e.Status, time.Since(start).Seconds())
}

// upstreamFailed is the ReverseProxy's ErrorHandler: a typed JSON error and a metric by reason.
func (h *Handler) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(*Target)
	e := h.upstreamFailure(err, r, t)
	if e == nil {
		// Nobody is listening; a status for the logs and metrics only.
		w.WriteHeader(499)
		return
	}
	e.Write(w)
}

// upstreamFailure is the one place that decides what an error on the way to or from the Pod
// answers, for the proxy and the tunnel alike: it counts the failure by reason and returns the
// typed error for the client, naming the Sandbox and Pod (t, when known) and logged; nil when the
// client has gone, as nobody is left to answer.
func (h *Handler) upstreamFailure(err error, r *http.Request, t *Target) *Error {
	reason, e := classify(err, r)
	h.metrics.upstreamError(reason)
	if reason == "client_canceled" {
		return nil
	}
	if t != nil {
		e.Detail += " (Sandbox " + t.Namespace + "/" + t.Name + ", Pod " + t.Addr.String() + ")"
		h.log.Info("upstream failure", "namespace", t.Namespace, "sandbox", t.Name, "addr", t.Addr.String(), "reason", reason, "error", err.Error())
	}
	return e
}

// classify maps an upstream error to a metric reason and the client's error.
func classify(err error, r *http.Request) (string, *Error) {
	unreachable := func(reason, detail string) (string, *Error) {
		return reason, &Error{Status: http.StatusBadGateway, Reason: ReasonUpstreamUnreachable, Detail: detail}
	}
	switch {
	case r.Context().Err() == context.Canceled || errors.Is(err, context.Canceled):
		return "client_canceled", &Error{Status: 499, Reason: ReasonUpstreamError, Detail: "the client went away"}
	case isDialError(err) && errors.Is(err, syscall.ECONNREFUSED):
		return unreachable("connection_refused", "could not connect to the sandbox: connection refused")
	case isDialError(err) && (errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)):
		return unreachable("unreachable", "could not connect to the sandbox: no route to its Pod")
	case isDialError(err) && isTimeout(err):
		return unreachable("dial_timeout", "could not connect to the sandbox: connect timed out")
	case isDialError(err):
		return unreachable("dial_other", "could not connect to the sandbox: "+err.Error())
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout", &Error{Status: http.StatusGatewayTimeout, Reason: ReasonUpstreamTimeout, Detail: "the sandbox did not answer in time"}
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "connection_reset", &Error{Status: http.StatusBadGateway, Reason: ReasonUpstreamError, Detail: "the sandbox closed the connection"}
	default:
		return "other", &Error{Status: http.StatusBadGateway, Reason: ReasonUpstreamError, Detail: "error talking to the sandbox: " + err.Error()}
	}
}

// isDialError: the connection to the Pod was never made.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// statusWriter remembers the status code for metrics; Unwrap keeps http.ResponseController
// (flushing, deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// bufferPool lends ReverseProxy 32 KiB copy buffers, so a streamed response does not allocate
// one per request.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

func (bufferPool) Get() []byte  { return *(buffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
