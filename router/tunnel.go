package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Upgrades (WebSocket and other protocols) are proxied by the router itself rather than by
// httputil.ReverseProxy: ReverseProxy keeps three goroutines and two 32 KiB copy buffers per
// upgraded connection, about 100 KiB for an idle WebSocket. Here an idle tunnel holds two small
// goroutines waiting for readability and no buffer; a buffer is borrowed from a pool only while
// bytes move (see waitReadable).

// isUpgrade: the request asks to switch protocols (Connection: upgrade plus an Upgrade header).
func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h[name] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// hopHeaders are connection-level headers a proxy must not forward (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if t = textproto.TrimString(t); t != "" {
				h.Del(t)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// serveUpgrade proxies a request that asks to switch protocols. The handshake with the Pod is
// bounded like a request, and its failures are answered like one; the tunnel after it is not.
func (h *Handler) serveUpgrade(w http.ResponseWriter, r *http.Request, t *Target, start time.Time) {
	fail := func(err error) {
		if e := h.upstreamFailure(err, r, t); e != nil {
			e.Write(w)
			h.metrics.observe(e.Status, time.Since(start).Seconds())
		}
	}
	ctx, cancel := h.bounded(r.Context())
	defer cancel()
	backend, err := h.dialer.DialContext(ctx, "tcp", t.Addr.String())
	if err != nil {
		fail(err)
		return
	}
	stop := bindDeadline(ctx, backend)
	defer stop()
	upgrade := r.Header.Get("Upgrade")
	resp, br, err := handshake(backend, upgradeRequest(ctx, r, t, upgrade))
	if err != nil {
		_ = backend.Close()
		fail(err)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		h.passDeclined(w, resp, backend, start)
		return
	}
	if got := resp.Header.Get("Upgrade"); !strings.EqualFold(got, upgrade) {
		_ = backend.Close()
		h.refuseSwitch(w, got, upgrade, start)
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = backend.Close()
		fail(fmt.Errorf("can't switch protocols: %w", err))
		return
	}
	stop()
	if err := switchProtocols(client, brw, backend, br, resp); err != nil {
		_ = client.Close()
		_ = backend.Close()
		return
	}
	h.metrics.observe(http.StatusSwitchingProtocols, time.Since(start).Seconds())
	h.open(client, backend)
}

// bindDeadline makes the handshake on backend end with ctx: the connection takes ctx's deadline,
// and ctx ending (the client gone, the timeout) unblocks it at once. stop undoes the latter, for
// the tunnel outlives ctx.
func bindDeadline(ctx context.Context, backend net.Conn) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		_ = backend.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { _ = backend.SetDeadline(time.Unix(1, 0)) })
}

// upgradeRequest is the handshake sent to the Pod: r without its hop-by-hop headers but the
// upgrade, without the caller's credential and Origin, with X-Forwarded-* from the connection.
func upgradeRequest(ctx context.Context, r *http.Request, t *Target, upgrade string) *http.Request {
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = "http", t.Addr.String(), ""
	removeHopHeaders(out.Header)
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", upgrade)
	out.Header.Del(HeaderAuthorization)
	// Browsers' Origin names the router's host, not the Pod's; WebSocket servers that check it
	// against Host would refuse every browser. Upstream drops it on upgrades, and so do we.
	out.Header.Del("Origin")
	setForwarded(out.Header, r)
	return out
}

// handshake sends the upgrade request to the Pod and reads its answer; the reader holds whatever
// the Pod sent after it.
func handshake(backend net.Conn, out *http.Request) (*http.Response, *bufio.Reader, error) {
	if err := out.Write(backend); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(backend, 4096)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		return nil, nil, err
	}
	return resp, br, nil
}

// passDeclined passes the Pod's answer on as an ordinary response when it declines the upgrade.
func (h *Handler) passDeclined(w http.ResponseWriter, resp *http.Response, backend net.Conn, start time.Time) {
	defer backend.Close()
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	h.metrics.observe(resp.StatusCode, time.Since(start).Seconds())
}

// refuseSwitch answers a Pod that switched to another protocol than the client asked for: the
// client could not speak it.
func (h *Handler) refuseSwitch(w http.ResponseWriter, got, asked string, start time.Time) {
	h.metrics.upstreamError("bad_upgrade")
	e := &Error{Status: http.StatusBadGateway, Reason: ReasonUpstreamError,
		Detail: fmt.Sprintf("the sandbox switched to protocol %q, the client asked for %q", got, asked)}
	e.Write(w)
	h.metrics.observe(e.Status, time.Since(start).Seconds())
}

// switchProtocols finishes the handshake on the hijacked client connection: no deadlines from
// here on, the Pod's 101 written to the client, and the bytes either side sent right after the
// handshake, already in the readers, passed on.
func switchProtocols(client net.Conn, brw *bufio.ReadWriter, backend net.Conn, br *bufio.Reader, resp *http.Response) error {
	_ = backend.SetDeadline(time.Time{})
	_ = client.SetDeadline(time.Time{})
	resp.Header.Del("Content-Length") // a 101 has no body
	if err := writeSwitch(brw.Writer, resp); err != nil {
		return err
	}
	if err := drain(backend, brw.Reader); err != nil {
		return err
	}
	return drain(client, br)
}

func writeSwitch(w *bufio.Writer, resp *http.Response) error {
	if _, err := fmt.Fprintf(w, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols)); err != nil {
		return err
	}
	if err := resp.Header.Write(w); err != nil {
		return err
	}
	if _, err := w.WriteString("\r\n"); err != nil {
		return err
	}
	return w.Flush()
}

// drain writes what r has buffered to dst.
func drain(dst io.Writer, r *bufio.Reader) error {
	n := r.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := r.Peek(n)
	_, err := dst.Write(b)
	return err
}

// setForwarded sets X-Forwarded-For/-Host/-Proto from the inbound connection only, as
// ProxyRequest.SetXForwarded does for ordinary requests: inbound values are not trusted.
func setForwarded(out http.Header, in *http.Request) {
	out.Del("Forwarded")
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		out.Set("X-Forwarded-For", ip)
	} else {
		out.Del("X-Forwarded-For")
	}
	out.Set("X-Forwarded-Host", in.Host)
	if in.TLS != nil {
		out.Set("X-Forwarded-Proto", "https")
	} else {
		out.Set("X-Forwarded-Proto", "http")
	}
}

// tunnel is one upgraded connection: bytes in both directions until both ends are done.
type tunnel struct {
	client, backend net.Conn
	done            atomic.Int32
	closeOnce       sync.Once
	h               *Handler
}

func (h *Handler) open(client, backend net.Conn) {
	t := &tunnel{client: client, backend: backend, h: h}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		t.close()
		return
	}
	h.tunnels[t] = struct{}{}
	h.mu.Unlock()
	h.metrics.tunnel(1)
	go t.pipe(backend, client)
	go t.pipe(client, backend)
}

// pipe copies src to dst. When src ends, dst's write side is closed (a half-close), so a
// protocol that finishes one direction first still works; when both are done, or either
// fails, the tunnel closes.
func (t *tunnel) pipe(dst, src net.Conn) {
	err := copyIdle(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
	} else {
		t.close()
	}
	if t.done.Add(1) == 2 {
		t.close()
	}
}

func (t *tunnel) close() {
	t.closeOnce.Do(func() {
		_ = t.client.Close()
		_ = t.backend.Close()
		h := t.h
		h.mu.Lock()
		_, tracked := h.tunnels[t]
		delete(h.tunnels, t)
		h.mu.Unlock()
		if tracked {
			h.metrics.tunnel(-1)
		}
	})
}

// copyIdle copies like io.Copy but holds no buffer while src is idle.
func copyIdle(dst, src net.Conn) error {
	for {
		if err := waitReadable(src); err != nil {
			return ignoreClosed(err)
		}
		bp := buffers.Get().(*[]byte)
		n, rerr := src.Read(*bp)
		var werr error
		if n > 0 {
			_, werr = dst.Write((*bp)[:n])
		}
		buffers.Put(bp)
		if werr != nil {
			return werr
		}
		if rerr != nil {
			return ignoreClosed(rerr)
		}
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close closes every open tunnel and refuses new ones; http.Server.Shutdown does not know
// about hijacked connections, so the command calls this after it.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	ts := make([]*tunnel, 0, len(h.tunnels))
	for t := range h.tunnels {
		ts = append(ts, t)
	}
	h.mu.Unlock()
	for _, t := range ts {
		t.close()
	}
	h.transport.CloseIdleConnections()
}
