package testimage

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dialWS opens a client connection to path on url, failing the test otherwise; the connection is
// closed when the test ends.
func dialWS(t *testing.T, url string, header http.Header) *WSConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, resp, err := DialWebSocket(ctx, url, header)
	if err != nil {
		t.Fatalf("DialWebSocket(%s): %v", url, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// message is one data message, as a test compares it.
type message struct {
	Type MessageType
	Data string
}

func TestWebSocketEcho(t *testing.T) {
	srv := newServer(t, Config{PodName: "web-0"})
	for _, scheme := range []string{"ws", "http"} {
		t.Run(scheme, func(t *testing.T) {
			c := dialWS(t, scheme+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
			// One connection carries every message, so lengths of all three encodings follow each
			// other on one stream, as they do through the router.
			cases := []struct {
				reason string
				msg    message
			}{
				{"a short text message: 7-bit length", message{TextMessage, "hello"}},
				{"an empty message", message{TextMessage, ""}},
				{"125 bytes: the largest 7-bit length", message{TextMessage, strings.Repeat("a", 125)}},
				{"126 bytes: the smallest 16-bit length", message{BinaryMessage, strings.Repeat("b", 126)}},
				{"65535 bytes: the largest 16-bit length", message{TextMessage, strings.Repeat("c", 65535)}},
				{"70,000 bytes of text: a 64-bit length", message{TextMessage, strings.Repeat("déjà vu ", 8750)}},
				{"70,000 bytes of binary, every byte value", message{BinaryMessage, string(binarySample(70_000))}},
				{"a message after the large ones", message{TextMessage, "bye"}},
			}
			for _, tc := range cases {
				if err := c.WriteMessage(tc.msg.Type, []byte(tc.msg.Data)); err != nil {
					t.Fatalf("%s: write: %v", tc.reason, err)
				}
				typ, b, err := c.ReadMessage()
				if err != nil {
					t.Fatalf("%s: read: %v", tc.reason, err)
				}
				if diff := cmp.Diff(tc.msg, message{typ, string(b)}); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
				}
			}
			if err := c.WriteText("text"); err != nil {
				t.Fatal(err)
			}
			if got, err := c.ReadText(); err != nil || got != "text" {
				t.Errorf("ReadText = %q, %v; want text", got, err)
			}
			if err := c.WriteBinary([]byte{1, 2}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadText(); err == nil {
				t.Error("ReadText returned a binary message without an error")
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := c.WriteText("late"); err == nil {
				t.Error("a write after Close succeeded")
			}
		})
	}
}

func binarySample(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestWebSocketPing checks both directions: the echo server answers the client's ping, and the
// client answers a server's ping while it reads.
func TestWebSocketPing(t *testing.T) {
	t.Run("server answers", func(t *testing.T) {
		srv := newServer(t, Config{})
		c := dialWS(t, srv.URL+"/ws", nil)
		var pongs []string
		c.SetPongHandler(func(data string) { pongs = append(pongs, data) })
		if err := c.Ping("p1"); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteText("after the ping"); err != nil {
			t.Fatal(err)
		}
		if got, err := c.ReadText(); err != nil || got != "after the ping" {
			t.Fatalf("ReadText = %q, %v", got, err)
		}
		if diff := cmp.Diff([]string{"p1"}, pongs); diff != "" {
			t.Errorf("the pong arrives before the echo of what followed the ping (-want +got):\n%s", diff)
		}
		if err := c.Ping(strings.Repeat("x", 126)); err == nil {
			t.Error("a 126-byte ping was sent; control frames carry at most 125")
		}
	})
	t.Run("client answers", func(t *testing.T) {
		pong := make(chan string, 1)
		url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := UpgradeWebSocket(w, r)
			if err != nil {
				return
			}
			defer s.Close()
			s.SetPongHandler(func(data string) { pong <- data })
			if s.Ping("from the server") != nil {
				return
			}
			for {
				t, b, err := s.ReadMessage()
				if err != nil || s.WriteMessage(t, b) != nil {
					return
				}
			}
		}))
		c := dialWS(t, url, nil)
		if err := c.WriteText("x"); err != nil {
			t.Fatal(err)
		}
		if got, err := c.ReadText(); err != nil || got != "x" {
			t.Fatalf("ReadText = %q, %v", got, err)
		}
		select {
		case got := <-pong:
			if got != "from the server" {
				t.Errorf("pong payload %q, want the ping's", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the client did not answer the server's ping")
		}
	})
}

func TestWebSocketClose(t *testing.T) {
	t.Run("server closes", func(t *testing.T) {
		url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s, err := UpgradeWebSocket(w, r); err == nil {
				s.closeWith(4000, "bye")
			}
		}))
		c := dialWS(t, url, nil)
		_, err := c.ReadText()
		ce, ok := errors.AsType[*CloseError](err)
		if !ok {
			t.Fatalf("ReadText error = %v, want a *CloseError", err)
		}
		if diff := cmp.Diff(&CloseError{Code: 4000, Reason: "bye"}, ce); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := c.WriteText("late"); !errors.Is(err, ErrCloseSent) {
			t.Errorf("a write after the close exchange = %v, want ErrCloseSent", err)
		}
	})
	t.Run("client closes", func(t *testing.T) {
		got := make(chan error, 1)
		url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := UpgradeWebSocket(w, r)
			if err != nil {
				return
			}
			defer s.Close()
			_, _, err = s.ReadMessage()
			got <- err
		}))
		c := dialWS(t, url, nil)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took >= closeHandshakeWindow {
			t.Errorf("Close took %v: it waited out its window instead of seeing the server close", took)
		}
		ce, ok := errors.AsType[*CloseError](<-got)
		if !ok || ce.Code != CloseNormal {
			t.Errorf("the server read %v, want a close with %d", ce, CloseNormal)
		}
	})
}

func TestWebSocketHandshakeHeaders(t *testing.T) {
	var mu sync.Mutex
	var seen *http.Request
	url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r
		mu.Unlock()
		if s, err := UpgradeWebSocket(w, r); err == nil {
			s.Close()
		}
	}))
	c := dialWS(t, url+"/some/path?x=1", http.Header{
		"X-Sandbox-Id":  {"sb"},
		"authorization": {"Bearer secret"},
		"Host":          {"router.example"},
	})
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	type handshake struct {
		Host, URI, SandboxID, Authorization, Origin, Version string
	}
	want := handshake{Host: "router.example", URI: "/some/path?x=1", SandboxID: "sb", Authorization: "Bearer secret", Version: "13"}
	got := handshake{
		Host: seen.Host, URI: seen.RequestURI, SandboxID: seen.Header.Get("X-Sandbox-ID"),
		Authorization: seen.Header.Get("Authorization"), Origin: seen.Header.Get("Origin"),
		Version: seen.Header.Get("Sec-WebSocket-Version"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the handshake carries the caller's headers and no Origin of its own (-want +got):\n%s", diff)
	}
}

func TestDialWebSocketErrors(t *testing.T) {
	srv := newServer(t, Config{})
	cases := map[string]struct {
		reason     string
		url        string
		header     http.Header
		wantStatus int    // of the returned response; 0 for none
		wantBody   string // of the returned response
		badHS      bool   // the error wraps ErrBadHandshake
	}{
		"not a websocket endpoint": {
			reason: "a 200 is a refused handshake; its body stays readable",
			url:    srv.URL + "/healthz", wantStatus: 200, wantBody: "ok", badHS: true,
		},
		"wss": {
			reason: "TLS is not supported",
			url:    "wss://127.0.0.1:1/ws",
		},
		"https": {
			reason: "TLS is not supported",
			url:    "https://127.0.0.1:1/ws",
		},
		"no host": {
			reason: "a URL without a host is refused before dialling",
			url:    "ws:///ws",
		},
		"reserved header": {
			reason: "the handshake's own headers cannot be overridden",
			url:    srv.URL + "/ws", header: http.Header{"Connection": {"close"}},
		},
		"bad header name": {
			reason: "a header name that is not a token is refused",
			url:    srv.URL + "/ws", header: http.Header{"Bad Name": {"x"}},
		},
		"refused": {
			reason: "nothing listening",
			url:    "ws://" + closedPort(t, "tcp") + "/ws",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, resp, err := DialWebSocket(ctx, tc.url, tc.header)
			if err == nil {
				c.Close()
				t.Fatalf("%s: DialWebSocket succeeded", tc.reason)
			}
			if c != nil {
				t.Errorf("a connection with the error %v", err)
			}
			if got := errors.Is(err, ErrBadHandshake); got != tc.badHS {
				t.Errorf("%s: errors.Is(%v, ErrBadHandshake) = %v", tc.reason, err, got)
			}
			var status int
			var body string
			if resp != nil {
				status = resp.StatusCode
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
			}
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantBody}, []any{status, body}); diff != "" {
				t.Errorf("%s: response (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDialWebSocketContext(t *testing.T) {
	// A server that accepts and never answers the handshake: only the context can end the dial.
	addr := silentTCP(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := DialWebSocket(ctx, "ws://"+addr+"/ws", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the dial took %v with a 200ms context", took)
	}
}

func TestUpgradeWebSocketRefusals(t *testing.T) {
	srv := newServer(t, Config{})
	valid := http.Header{
		"Upgrade":               {"websocket"},
		"Connection":            {"keep-alive, Upgrade"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="},
	}
	with := func(k, v string) http.Header {
		h := valid.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	type refusal struct {
		Status  int
		Header  string // the header the error names
		Version string // Sec-WebSocket-Version of the answer
	}
	cases := map[string]struct {
		reason string
		header http.Header
		want   refusal
	}{
		"plain get": {
			reason: "a GET without Upgrade is a bad handshake, not an echo",
			header: http.Header{}, want: refusal{Status: 400, Header: "Upgrade"},
		},
		"no connection upgrade": {
			reason: "Connection must list Upgrade",
			header: with("Connection", "keep-alive"), want: refusal{Status: 400, Header: "Connection"},
		},
		"old version": {
			reason: "another protocol version is 426 with the supported one",
			header: with("Sec-Websocket-Version", "8"), want: refusal{Status: 426, Header: "Sec-WebSocket-Version", Version: "13"},
		},
		"no key": {
			reason: "the key is required",
			header: with("Sec-Websocket-Key", ""), want: refusal{Status: 400, Header: "Sec-WebSocket-Key"},
		},
		"short key": {
			reason: "the key is 16 bytes",
			header: with("Sec-Websocket-Key", "c2hvcnQ="), want: refusal{Status: 400, Header: "Sec-WebSocket-Key"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tc.header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			e := decode[ErrorBody](t, response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(b)})
			header, _, _ := strings.Cut(e.Error, ":")
			got := refusal{Status: resp.StatusCode, Header: header, Version: resp.Header.Get("Sec-WebSocket-Version")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s\nerror: %s", tc.reason, diff, e.Error)
			}
		})
	}
}

// rawFrame builds a frame byte by byte, so tests can send what WSConn never would. A nil key sends
// the frame unmasked; length, when not -1, replaces the payload's length in the header.
func rawFrame(first byte, key []byte, payload []byte, length int64) []byte {
	if length < 0 {
		length = int64(len(payload))
	}
	var mask byte
	if key != nil {
		mask = 0x80
	}
	f := []byte{first}
	switch {
	case length <= 125:
		f = append(f, mask|byte(length))
	case length <= 0xFFFF:
		f = append(f, mask|126)
		f = binary.BigEndian.AppendUint16(f, uint16(length))
	default:
		f = append(f, mask|127)
		f = binary.BigEndian.AppendUint64(f, uint64(length))
	}
	if key == nil {
		return append(f, payload...)
	}
	f = append(f, key...)
	start := len(f)
	f = append(f, payload...)
	for i := start; i < len(f); i++ {
		f[i] ^= key[(i-start)&3]
	}
	return f
}

// TestWebSocketServerProtocol sends the echo server frame sequences a WSConn never writes and
// checks what comes back: the echo, or the close code of a failed connection.
func TestWebSocketServerProtocol(t *testing.T) {
	srv := newServer(t, Config{})
	key := []byte{1, 2, 3, 4}
	fin := byte(0x80)
	topBit := make([]byte, 8)
	topBit[0] = 0x80
	cases := map[string]struct {
		reason string
		frames [][]byte
		want   []message // echoes, then (Type 0) the close code as Data
	}{
		"fragments with a ping between": {
			reason: "fragments are reassembled; a ping in the middle is answered (the pong is not a message)",
			frames: [][]byte{
				rawFrame(opText, key, []byte("hel"), -1),
				rawFrame(fin|opPing, key, []byte("mid"), -1),
				rawFrame(opContinuation, key, []byte("l"), -1),
				rawFrame(fin|opContinuation, key, []byte("o"), -1),
				rawFrame(fin|opClose, key, []byte{0x03, 0xE8}, -1),
			},
			want: []message{{TextMessage, "hello"}, {0, "1000"}},
		},
		"close without a code": {
			reason: "an empty close is answered with an empty close",
			frames: [][]byte{rawFrame(fin|opClose, key, nil, -1)},
			want:   []message{{0, "close"}},
		},
		"unmasked": {
			reason: "a client frame must be masked",
			frames: [][]byte{rawFrame(fin|opText, nil, []byte("hi"), -1)},
			want:   []message{{0, "1002"}},
		},
		"reserved bits": {
			reason: "no extension was negotiated",
			frames: [][]byte{rawFrame(fin|0x40|opText, key, []byte("hi"), -1)},
			want:   []message{{0, "1002"}},
		},
		"unknown opcode": {
			reason: "opcode 3 is reserved",
			frames: [][]byte{rawFrame(fin|0x3, key, []byte("hi"), -1)},
			want:   []message{{0, "1002"}},
		},
		"long control frame": {
			reason: "a ping carries at most 125 bytes",
			frames: [][]byte{rawFrame(fin|opPing, key, make([]byte, 126), -1)},
			want:   []message{{0, "1002"}},
		},
		"fragmented control frame": {
			reason: "control frames are never fragmented",
			frames: [][]byte{rawFrame(opPing, key, []byte("x"), -1)},
			want:   []message{{0, "1002"}},
		},
		"continuation first": {
			reason: "a continuation needs a message to continue",
			frames: [][]byte{rawFrame(fin|opContinuation, key, []byte("x"), -1)},
			want:   []message{{0, "1002"}},
		},
		"interleaved messages": {
			reason: "a new message cannot start inside another",
			frames: [][]byte{rawFrame(opText, key, []byte("a"), -1), rawFrame(fin|opText, key, []byte("b"), -1)},
			want:   []message{{0, "1002"}},
		},
		"invalid utf-8": {
			reason: "a text message must be UTF-8",
			frames: [][]byte{rawFrame(fin|opText, key, []byte{0xff, 0xfe}, -1)},
			want:   []message{{0, "1007"}},
		},
		"huge length": {
			reason: "a frame announcing a terabyte is refused before anything is allocated",
			frames: [][]byte{rawFrame(fin|opBinary, key, nil, 1<<40)},
			want:   []message{{0, "1009"}},
		},
		"top bit of the length": {
			reason: "a 64-bit length must have its top bit clear",
			frames: [][]byte{append([]byte{fin | opBinary, 0x80 | 127}, append(topBit, key...)...)},
			want:   []message{{0, "1002"}},
		},
		"one-byte close": {
			reason: "a close payload is empty or at least a code",
			frames: [][]byte{rawFrame(fin|opClose, key, []byte{3}, -1)},
			want:   []message{{0, "1002"}},
		},
		"reserved close code": {
			reason: "1005 is for reporting, never sent",
			frames: [][]byte{rawFrame(fin|opClose, key, []byte{0x03, 0xED}, -1)},
			want:   []message{{0, "1002"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialWS(t, srv.URL+"/ws", nil)
			for _, f := range tc.frames {
				if _, err := c.conn.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			got := readUntilClose(t, c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// readUntilClose reads data messages until the server's close, which it reports as a message of
// type 0 whose data is the close code ("close" for a close without one). Pongs are skipped.
func readUntilClose(t *testing.T, c *WSConn) []message {
	t.Helper()
	var got []message
	for {
		typ, b, err := c.ReadMessage()
		if err == nil {
			got = append(got, message{typ, string(b)})
			continue
		}
		ce, ok := errors.AsType[*CloseError](err)
		switch {
		case !ok:
			t.Fatalf("after %v: %v, want the server's close", got, err)
		case ce.Code == CloseNoStatus:
			return append(got, message{0, "close"})
		default:
			return append(got, message{0, strconv.Itoa(ce.Code)})
		}
	}
}

// TestWebSocketClientProtocol checks the client's side of the masking rule: a server must not mask.
func TestWebSocketClientProtocol(t *testing.T) {
	closed := make(chan []byte, 1)
	url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := UpgradeWebSocket(w, r)
		if err != nil {
			return
		}
		defer s.conn.Close()
		_, _ = s.conn.Write(rawFrame(0x80|opText, []byte{9, 9, 9, 9}, []byte("masked"), -1))
		// What the client sends back is its close frame, masked as a client's is.
		_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		fin, op, payload, err := s.readFrame(1 << 10)
		if err != nil || !fin || op != opClose {
			closed <- nil
			return
		}
		closed <- payload
	}))
	c := dialWS(t, url, nil)
	_, err := c.ReadText()
	pe, ok := errors.AsType[*protocolError](err)
	if !ok || pe.code != CloseProtocolError {
		t.Fatalf("ReadText error = %v, want a protocol error", err)
	}
	if p := <-closed; len(p) < 2 || binary.BigEndian.Uint16(p) != CloseProtocolError {
		t.Errorf("the client's close frame = %q, want code %d", p, CloseProtocolError)
	}
	if _, err := c.conn.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the client kept the connection open after a protocol error: %v", err)
	}
}
