package testimage

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// This file is the subset of RFC 6455 the test image and its tests need: the opening handshake on
// both sides, unfragmented writes, reads that reassemble fragments, ping/pong and the closing
// handshake. No extensions (permessage-deflate is never offered nor accepted), no subprotocol
// selection, no TLS: the router's tests run over plain TCP.

// MessageType is the type of a data message (RFC 6455 section 5.6).
type MessageType int

// The data message types, numbered as their opcodes.
const (
	TextMessage   MessageType = opText
	BinaryMessage MessageType = opBinary
)

func (t MessageType) String() string {
	switch t {
	case TextMessage:
		return "text"
	case BinaryMessage:
		return "binary"
	}
	return fmt.Sprintf("MessageType(%d)", int(t))
}

// Opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// Close codes (RFC 6455 section 7.4.1) this package sends or reports.
const (
	CloseNormal         = 1000
	CloseGoingAway      = 1001
	CloseProtocolError  = 1002
	CloseNoStatus       = 1005 // never sent: what CloseError reports for a close frame without a code
	CloseInvalidPayload = 1007
	CloseMessageTooBig  = 1009
)

const (
	maxControlPayload = 125
	websocketGUID     = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
	// closeHandshakeWindow bounds how long a close waits to write its frame and for the peer.
	closeHandshakeWindow = time.Second
)

// DefaultReadLimit bounds a message ReadMessage assembles, so a broken or hostile peer announcing a
// 2^63-byte frame gets a 1009 close instead of an allocation that kills the Pod.
const DefaultReadLimit = 16 << 20

// ErrCloseSent is returned by writes after this side has sent its close frame.
var ErrCloseSent = errors.New("websocket: close frame already sent")

// ErrBadHandshake is wrapped by DialWebSocket's error when the server did not answer a valid 101.
var ErrBadHandshake = errors.New("websocket: bad handshake")

// CloseError is returned by reads once the peer has sent a close frame; this side has answered it.
type CloseError struct {
	// Code is the peer's status code, or CloseNoStatus (1005) when its frame had none.
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("websocket: closed by peer: %d", e.Code)
	}
	return fmt.Sprintf("websocket: closed by peer: %d %s", e.Code, e.Reason)
}

// protocolError is a violation by the peer; the connection is failed with code (RFC 6455 7.1.7).
type protocolError struct {
	code int
	msg  string
}

func (e *protocolError) Error() string { return "websocket: " + e.msg }

// WSConn is one side of a WebSocket connection. Reads must come from one goroutine at a time;
// writes may come from any number, and are serialised, so the automatic answers to pings never
// interleave with a message.
type WSConn struct {
	conn net.Conn
	br   *bufio.Reader
	// client is the side that masks what it sends and refuses masked frames (RFC 6455 5.1).
	client    bool
	readLimit int64
	pong      func(data string)

	wmu       sync.Mutex
	closeSent bool

	closeOnce sync.Once
	closeErr  error
}

func newWSConn(conn net.Conn, br *bufio.Reader, client bool) *WSConn {
	return &WSConn{conn: conn, br: br, client: client, readLimit: DefaultReadLimit}
}

// SetReadLimit sets the largest message ReadMessage accepts; a larger one fails the connection with
// 1009. Call it before reading.
func (c *WSConn) SetReadLimit(n int64) { c.readLimit = n }

// SetPongHandler sets a function called with the payload of every pong read. Without one, pongs are
// dropped. Call it before reading; it runs on the reading goroutine.
func (c *WSConn) SetPongHandler(f func(data string)) { c.pong = f }

// SetDeadline sets the read and write deadline of the underlying connection.
func (c *WSConn) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection, so a test can wait for a
// message for a bounded time.
func (c *WSConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// WriteText sends s as one text message.
func (c *WSConn) WriteText(s string) error { return c.writeFrame(opText, []byte(s)) }

// WriteBinary sends b as one binary message.
func (c *WSConn) WriteBinary(b []byte) error { return c.writeFrame(opBinary, b) }

// WriteMessage sends b as one message of type t.
func (c *WSConn) WriteMessage(t MessageType, b []byte) error {
	if t != TextMessage && t != BinaryMessage {
		return fmt.Errorf("websocket: cannot write a message of type %v", t)
	}
	return c.writeFrame(byte(t), b)
}

// Ping sends a ping; the peer's pong goes to the pong handler of whoever reads.
func (c *WSConn) Ping(data string) error {
	if len(data) > maxControlPayload {
		return fmt.Errorf("websocket: a ping carries at most %d bytes, not %d", maxControlPayload, len(data))
	}
	return c.writeFrame(opPing, []byte(data))
}

// ReadText reads the next message and returns it if it is text. A binary message is an error (the
// connection stays usable); so is the peer's close, as a *CloseError.
func (c *WSConn) ReadText() (string, error) {
	t, b, err := c.ReadMessage()
	if err != nil {
		return "", err
	}
	if t != TextMessage {
		return "", fmt.Errorf("websocket: got a %v message of %d bytes, want text", t, len(b))
	}
	return string(b), nil
}

// ReadMessage reads the next data message, reassembling fragments. On the way it answers pings
// with pongs and hands pongs to the pong handler. When the peer closes, it answers the close and
// returns a *CloseError; when the peer breaks the protocol, it fails the connection (sends a close
// with the reason and closes the TCP connection) and returns the violation.
func (c *WSConn) ReadMessage() (MessageType, []byte, error) {
	var (
		typ     MessageType
		msg     []byte
		started bool
	)
	for {
		fin, op, payload, err := c.readFrame(c.readLimit - int64(len(msg)))
		if err != nil {
			return 0, nil, c.fail(err)
		}
		switch op {
		case opPing:
			if err := c.writeFrame(opPong, payload); err != nil && !errors.Is(err, ErrCloseSent) {
				return 0, nil, err
			}
			continue
		case opPong:
			if c.pong != nil {
				c.pong(string(payload))
			}
			continue
		case opClose:
			ce, err := parseClose(payload)
			if err != nil {
				return 0, nil, c.fail(err)
			}
			// Echo the code, as RFC 6455 5.5.1 suggests; a close without a code is answered
			// without one.
			var reply []byte
			if ce.Code != CloseNoStatus {
				reply = binary.BigEndian.AppendUint16(nil, uint16(ce.Code))
			}
			// The peer may already have closed the TCP connection; the close it sent is what this
			// read reports either way.
			_ = c.writeFrame(opClose, reply)
			return 0, nil, ce
		case opText, opBinary:
			if started {
				return 0, nil, c.fail(&protocolError{CloseProtocolError, "a new message began before the previous one ended"})
			}
			typ, msg, started = MessageType(op), payload, true
		case opContinuation:
			if !started {
				return 0, nil, c.fail(&protocolError{CloseProtocolError, "a continuation frame without a message to continue"})
			}
			msg = append(msg, payload...)
		default:
			return 0, nil, c.fail(&protocolError{CloseProtocolError, fmt.Sprintf("unknown opcode %#x", op)})
		}
		if fin {
			if typ == TextMessage && !utf8.Valid(msg) {
				return 0, nil, c.fail(&protocolError{CloseInvalidPayload, "a text message that is not UTF-8"})
			}
			if msg == nil {
				msg = []byte{}
			}
			return typ, msg, nil
		}
	}
}

// Close starts or completes the closing handshake and closes the connection. A client waits up to
// a second for the server to close the TCP connection first, as RFC 6455 7.1.1 asks: closing with
// the server's answer unread would make the kernel reset the connection, and a router in between
// would see an error instead of a close.
func (c *WSConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.conn.SetWriteDeadline(time.Now().Add(closeHandshakeWindow))
		err := c.writeFrame(opClose, binary.BigEndian.AppendUint16(nil, CloseNormal))
		if c.client && (err == nil || errors.Is(err, ErrCloseSent)) {
			_ = c.conn.SetReadDeadline(time.Now().Add(closeHandshakeWindow))
			_, _ = io.Copy(io.Discard, c.conn)
		}
		c.closeErr = c.conn.Close()
	})
	return c.closeErr
}

// closeWith sends a close frame with code and reason (unless one was sent) and closes the
// connection without waiting: the server's way out when it shuts down or the peer misbehaves.
func (c *WSConn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		_ = c.conn.SetWriteDeadline(time.Now().Add(closeHandshakeWindow))
		payload := binary.BigEndian.AppendUint16(nil, uint16(code))
		if len(reason) <= maxControlPayload-2 {
			payload = append(payload, reason...)
		}
		_ = c.writeFrame(opClose, payload)
		c.closeErr = c.conn.Close()
	})
}

// fail closes the connection after a protocol violation; other errors (the connection broke) are
// returned as they are.
func (c *WSConn) fail(err error) error {
	if pe, ok := errors.AsType[*protocolError](err); ok {
		c.closeWith(pe.code, pe.msg)
	}
	return err
}

func (c *WSConn) writeFrame(op byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return ErrCloseSent
	}
	if op == opClose {
		c.closeSent = true
	}
	frame := make([]byte, 0, 14+len(payload))
	frame = append(frame, 0x80|op) // FIN: this package never fragments what it sends
	var maskBit byte
	if c.client {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n <= 125:
		frame = append(frame, maskBit|byte(n))
	case n <= 0xFFFF:
		frame = append(frame, maskBit|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	default:
		frame = append(frame, maskBit|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	if !c.client {
		frame = append(frame, payload...)
	} else {
		// A fresh unpredictable key per frame, as RFC 6455 5.3 requires of clients; the payload is
		// masked in the copy, never in the caller's slice.
		var key [4]byte
		_, _ = rand.Read(key[:])
		frame = append(frame, key[:]...)
		start := len(frame)
		frame = append(frame, payload...)
		maskBytes(frame[start:], key)
	}
	_, err := c.conn.Write(frame)
	return err
}

// readFrame reads one frame, refusing a data payload larger than limit and any frame the role or
// RFC 6455 forbids.
func (c *WSConn) readFrame(limit int64) (fin bool, op byte, payload []byte, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return false, 0, nil, err
	}
	fin, op = hdr[0]&0x80 != 0, hdr[0]&0x0F
	masked, n := hdr[1]&0x80 != 0, int64(hdr[1]&0x7F)
	if hdr[0]&0x70 != 0 {
		return false, 0, nil, &protocolError{CloseProtocolError, "reserved bits set without a negotiated extension"}
	}
	if masked == c.client {
		if c.client {
			return false, 0, nil, &protocolError{CloseProtocolError, "a masked frame from the server"}
		}
		return false, 0, nil, &protocolError{CloseProtocolError, "an unmasked frame from the client"}
	}
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = int64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		u := binary.BigEndian.Uint64(b[:])
		if u>>63 != 0 {
			return false, 0, nil, &protocolError{CloseProtocolError, "a 64-bit length with its top bit set"}
		}
		n = int64(u)
	}
	if op >= opClose {
		if !fin || n > maxControlPayload {
			return false, 0, nil, &protocolError{CloseProtocolError, "a fragmented or oversized control frame"}
		}
	} else if n > limit {
		return false, 0, nil, &protocolError{CloseMessageTooBig, fmt.Sprintf("a message of more than %d bytes", c.readLimit)}
	}
	var key [4]byte
	if masked {
		if _, err := io.ReadFull(c.br, key[:]); err != nil {
			return false, 0, nil, err
		}
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return false, 0, nil, err
	}
	if masked {
		maskBytes(payload, key)
	}
	return fin, op, payload, nil
}

func maskBytes(b []byte, key [4]byte) {
	for i := range b {
		b[i] ^= key[i&3]
	}
}

// parseClose reads a close frame's payload (RFC 6455 5.5.1, 7.4).
func parseClose(p []byte) (*CloseError, error) {
	switch {
	case len(p) == 0:
		return &CloseError{Code: CloseNoStatus}, nil
	case len(p) == 1:
		return nil, &protocolError{CloseProtocolError, "a close frame with a one-byte payload"}
	}
	code := int(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) {
		return nil, &protocolError{CloseProtocolError, fmt.Sprintf("close code %d may not be sent", code)}
	}
	if !utf8.Valid(p[2:]) {
		return nil, &protocolError{CloseInvalidPayload, "a close reason that is not UTF-8"}
	}
	return &CloseError{Code: code, Reason: string(p[2:])}, nil
}

// validCloseCode reports whether a peer may send code: the defined codes other than those
// reserved for reporting (1005, 1006, 1015), and the ranges for libraries and applications.
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// acceptKey is Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// hasToken reports whether a comma-separated header (over all its values) lists token, as
// Connection: keep-alive, Upgrade does.
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// UpgradeWebSocket answers a WebSocket opening handshake with 101 and returns the server side of
// the connection. It accepts any Origin, as a sandbox behind the router does (the router drops
// Origin on upgrades), and selects no subprotocol or extension. When the request is not a valid
// handshake it answers 400 (426 for another protocol version) with a JSON error naming the header
// and returns that error.
func UpgradeWebSocket(w http.ResponseWriter, r *http.Request) (*WSConn, error) {
	fail := func(status int, msg string) (*WSConn, error) {
		writeError(w, status, msg)
		return nil, fmt.Errorf("%w: %s", ErrBadHandshake, msg)
	}
	if r.Method != http.MethodGet {
		return fail(http.StatusMethodNotAllowed, "a WebSocket handshake is a GET, not "+r.Method)
	}
	if !hasToken(r.Header, "Upgrade", "websocket") {
		return fail(http.StatusBadRequest, `Upgrade: Required value: "websocket"`)
	}
	if !hasToken(r.Header, "Connection", "upgrade") {
		return fail(http.StatusBadRequest, `Connection: Required value: "Upgrade"`)
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		return fail(http.StatusUpgradeRequired, fmt.Sprintf("Sec-WebSocket-Version: Unsupported value: %q: supported values: \"13\"", v))
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return fail(http.StatusBadRequest, fmt.Sprintf("Sec-WebSocket-Key: Invalid value: %q: must be 16 bytes in base64", key))
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fail(http.StatusInternalServerError, fmt.Sprintf("taking over the connection: %v", err))
	}
	// The server's read and write timeouts must not end a session that legitimately idles.
	_ = conn.SetDeadline(time.Time{})
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + acceptKey(key) + "\r\n\r\n"
	if _, err := io.WriteString(conn, resp); err != nil {
		conn.Close()
		return nil, err
	}
	// brw.Reader keeps whatever the client sent right behind its request.
	return newWSConn(conn, brw.Reader, false), nil
}

// serveWebSocketEcho echoes every message back unchanged until the peer closes. When the server
// shuts down (the request's context ends), it closes with 1001 Going Away.
func serveWebSocketEcho(w http.ResponseWriter, r *http.Request) {
	c, err := UpgradeWebSocket(w, r)
	if err != nil {
		return
	}
	defer c.Close()
	stop := context.AfterFunc(r.Context(), func() { c.closeWith(CloseGoingAway, "server shutting down") })
	defer stop()
	for {
		t, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(t, b); err != nil {
			return
		}
	}
}
