package testimage

import (
	"bufio"
	"bytes"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// discardConn is a net.Conn whose writes vanish: the reading side of a WSConn under fuzzing
// answers pings and closes into it.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (discardConn) Close() error                     { return nil }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzWebSocketRead feeds arbitrary bytes to both roles' frame reader: whatever a peer sends, a
// read ends in a message or an error, never a panic or an allocation past the read limit.
func FuzzWebSocketRead(f *testing.F) {
	key := []byte{1, 2, 3, 4}
	f.Add(rawFrame(0x80|opText, key, []byte("hello"), -1))
	f.Add(rawFrame(0x80|opText, nil, []byte("hello"), -1))
	f.Add(append(rawFrame(opBinary, key, []byte("a"), -1), rawFrame(0x80|opContinuation, key, []byte("b"), -1)...))
	f.Add(rawFrame(0x80|opPing, key, []byte("p"), -1))
	f.Add(rawFrame(0x80|opClose, nil, []byte{0x03, 0xE8, 'o', 'k'}, -1))
	f.Add(rawFrame(0x80|opBinary, key, nil, 1<<40))
	f.Add(rawFrame(0x80|opText, nil, bytes.Repeat([]byte("x"), 200), -1))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, client := range []bool{false, true} {
			c := newWSConn(discardConn{}, bufio.NewReader(bytes.NewReader(data)), client)
			c.SetReadLimit(1 << 17)
			for range 100 {
				typ, msg, err := c.ReadMessage()
				if err != nil {
					break
				}
				if typ != TextMessage && typ != BinaryMessage || int64(len(msg)) > 1<<17 {
					t.Fatalf("ReadMessage = %v, %d bytes", typ, len(msg))
				}
			}
		}
	})
}

// FuzzValidators checks the parameter validators never panic and that what they accept is what
// the endpoints rely on: a file name stays inside DataDir, an address splits into host and port.
func FuzzValidators(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a.txt", "a/b", "10.0.0.1:53", "[::1]:53", "fe80::1%eth0",
		"web.sandbox.test.", strings.Repeat("a", 64) + ".b", "2s", "-1s", "1e9", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validFileName(s) == nil && (strings.ContainsAny(s, `/\`) || s == "." || s == ".." || s == "") {
			t.Errorf("validFileName accepted %q", s)
		}
		_ = validDNSName(s)
		if v, err := dnsServerParam(s); err == nil && v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				t.Errorf("dnsServerParam(%q) = %q, which is not HOST:PORT", s, v)
			}
		}
		q := url.Values{"p": {s}}
		if v, err := hostPortParam(q, "p"); err == nil {
			if _, _, err := net.SplitHostPort(v); err != nil {
				t.Errorf("hostPortParam accepted %q", s)
			}
		}
		if d, err := durationParam(q, "p", time.Second, maxCheckTimeout, false); err == nil && (d <= 0 || d > maxCheckTimeout) {
			t.Errorf("durationParam(%q) = %v", s, d)
		}
		if n, err := intParam(q, "p", 5, 0, maxSSEEvents); err == nil && (n < 0 || n > maxSSEEvents) {
			t.Errorf("intParam(%q) = %d", s, n)
		}
	})
}
