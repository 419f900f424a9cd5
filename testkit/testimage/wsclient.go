package testimage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxErrorBody bounds the body of a refused handshake kept in the returned response: enough for
// the router's JSON errors, which is what a test wants to read.
const maxErrorBody = 64 << 10

// reservedHeaders are set by DialWebSocket itself; a caller's value would break the handshake.
var reservedHeaders = map[string]bool{
	"Upgrade":                  true,
	"Connection":               true,
	"Sec-Websocket-Key":        true,
	"Sec-Websocket-Version":    true,
	"Sec-Websocket-Extensions": true,
}

// DialWebSocket opens a WebSocket connection to a ws:// or http:// URL (no TLS: the e2e tests
// reach the router over plain TCP). header is sent with the handshake as is: the router's routing
// headers, Authorization, a Host to override the URL's, or an Origin; nothing else is added, so a
// test sees exactly what it sent. ctx bounds the dial and the handshake, not the connection.
//
// On a 101 with a valid Sec-WebSocket-Accept it returns the connection and the response. When the
// server answers anything else it returns a nil connection, the response with its body (up to
// 64 KiB) readable, and an error wrapping ErrBadHandshake, so a test can check the router's refusal.
func DialWebSocket(ctx context.Context, rawURL string, header http.Header) (*WSConn, *http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: %w", err)
	}
	if u.Scheme != "ws" && u.Scheme != "http" {
		return nil, nil, fmt.Errorf("websocket: scheme %q is not supported: use ws:// or http:// (no TLS)", u.Scheme)
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("websocket: %q has no host", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}

	var key [16]byte
	_, _ = rand.Read(key[:])
	wsKey := base64.StdEncoding.EncodeToString(key[:])
	req, err := handshakeRequest(u, header, wsKey)
	if err != nil {
		return nil, nil, err
	}

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("websocket: %w", err)
	}
	// Only the context ends the handshake: a deadline on the connection as well could fire a
	// moment before the context is done and report a timeout where the caller's deadline passed.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	br := bufio.NewReader(conn)
	resp, err := exchange(conn, br, req, u)
	if !stop() {
		// The context ended during the handshake; its error says why better than a timeout.
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("websocket: handshake with %s: %w", addr, err)
	}

	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, resp, fmt.Errorf("%w: %s answered %s", ErrBadHandshake, addr, resp.Status)
	}
	if msg := checkHandshakeResponse(resp, header, wsKey); msg != "" {
		conn.Close()
		return nil, resp, fmt.Errorf("%w: %s", ErrBadHandshake, msg)
	}
	return newWSConn(conn, br, true), resp, nil
}

// handshakeRequest is the opening handshake's bytes (RFC 6455 4.1).
func handshakeRequest(u *url.URL, header http.Header, key string) ([]byte, error) {
	h := http.Header{}
	host := u.Host
	for k, vs := range header {
		ck := http.CanonicalHeaderKey(k)
		if !validHeaderKey(ck) {
			return nil, fmt.Errorf("websocket: header %q is not a valid field name", k)
		}
		if reservedHeaders[ck] {
			return nil, fmt.Errorf("websocket: header %s is set by DialWebSocket", ck)
		}
		if ck == "Host" {
			if len(vs) > 0 {
				host = vs[0]
			}
			continue
		}
		h[ck] = append(h[ck], vs...)
	}
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Key", key)
	h.Set("Sec-WebSocket-Version", "13")
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), strings.NewReplacer("\r", "", "\n", "").Replace(host))
	// Header.Write replaces CR and LF in values, so a value cannot smuggle a header in.
	if err := h.Write(&b); err != nil {
		return nil, err
	}
	b.WriteString("\r\n")
	return b.Bytes(), nil
}

// exchange sends the handshake and reads the answer. The body of a refusal is read here, while the
// context still bounds the exchange, and kept in memory so it outlives the connection.
func exchange(conn net.Conn, br *bufio.Reader, req []byte, u *url.URL) (*http.Response, error) {
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet, URL: u})
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

// checkHandshakeResponse validates a 101 (RFC 6455 4.1, the client's checks); "" means valid.
func checkHandshakeResponse(resp *http.Response, header http.Header, key string) string {
	switch {
	case !hasToken(resp.Header, "Upgrade", "websocket"):
		return fmt.Sprintf("Upgrade: %q, want websocket", resp.Header.Get("Upgrade"))
	case !hasToken(resp.Header, "Connection", "upgrade"):
		return fmt.Sprintf("Connection: %q, want Upgrade", resp.Header.Get("Connection"))
	case resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key):
		return fmt.Sprintf("Sec-WebSocket-Accept: %q, want %q", resp.Header.Get("Sec-WebSocket-Accept"), acceptKey(key))
	case resp.Header.Get("Sec-WebSocket-Extensions") != "":
		return fmt.Sprintf("Sec-WebSocket-Extensions: %q was not offered", resp.Header.Get("Sec-WebSocket-Extensions"))
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" && !hasToken(header, "Sec-WebSocket-Protocol", p) {
		return fmt.Sprintf("Sec-WebSocket-Protocol: %q was not offered", p)
	}
	return ""
}

// validHeaderKey reports whether k is an HTTP token (RFC 9110 5.6.2).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if c <= ' ' || c >= 0x7F || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
