package testimage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Timeouts of /dial and /dns. A NetworkPolicy that drops packets shows as a timeout, so a test
// that expects "denied" waits the whole timeout: the default keeps that short, the maximum keeps a
// slow CNI from being mistaken for a deny.
const (
	defaultCheckTimeout = 2 * time.Second
	maxCheckTimeout     = 30 * time.Second
	// defaultUDPPayload is sent by a UDP dial without send: UDP needs a datagram to get an answer.
	defaultUDPPayload = "ping"
	// maxReply bounds the reply a dial reads and reports.
	maxReply = 512
)

// DialResult is the answer of GET /dial. OK means the other side answered: for TCP the
// connection was established and, when something was sent, at least one byte came back; for UDP
// a reply datagram arrived. HTTP status is 200 either way; only a bad request is a 4xx.
type DialResult struct {
	Proto string `json:"proto"`
	Addr  string `json:"addr"`
	OK    bool   `json:"ok"`
	// Error is why OK is false; "" when it is true.
	Error string `json:"error"`
	// Reply is the start of what came back (at most 512 bytes), so a test can tell which
	// server answered.
	Reply string `json:"reply"`
	// MS is how long the attempt took, in milliseconds.
	MS int64 `json:"ms"`
}

func serveDial(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	proto := q.Get("proto")
	switch proto {
	case "":
		proto = "tcp"
	case "tcp", "udp":
	default:
		writeError(w, http.StatusBadRequest, invalidParam("proto", proto, "must be tcp or udp").Error())
		return
	}
	addr, err := hostPortParam(q, "addr")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout, err := durationParam(q, "timeout", defaultCheckTimeout, maxCheckTimeout, false)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	send, hasSend := q.Get("send"), q.Has("send")
	if proto == "udp" && send == "" {
		send, hasSend = defaultUDPPayload, true
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	start := time.Now()
	reply, err := dial(ctx, proto, addr, send, hasSend)
	res := DialResult{Proto: proto, Addr: addr, OK: err == nil, Reply: reply, MS: time.Since(start).Milliseconds()}
	if err != nil {
		res.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, res)
}

// dial connects and, when asked to, sends send and waits for the first bytes of an answer.
func dial(ctx context.Context, proto, addr, send string, hasSend bool) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, proto, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if !hasSend {
		return "", nil
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Cancellation (the client went away, the server shuts down) ends a wait the deadline would.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write([]byte(send)); err != nil {
		return "", fmt.Errorf("sending: %w", err)
	}
	buf := make([]byte, maxReply)
	n, err := conn.Read(buf)
	if n > 0 {
		return string(buf[:n]), nil
	}
	if err == nil {
		err = errors.New("an empty reply")
	}
	return "", fmt.Errorf("waiting for a reply: %w", err)
}

// DNSResult is the answer of GET /dns: the A records of Name as Server (or, when Server is "", the
// Pod's resolv.conf) gave them. Every field is always present, so a shell test can read the JSON
// without defaults. HTTP status is 200 whether or not the lookup succeeded.
type DNSResult struct {
	Name   string   `json:"name"`
	Server string   `json:"server"`
	OK     bool     `json:"ok"`
	Addrs  []string `json:"addrs"`
	Error  string   `json:"error"`
	MS     int64    `json:"ms"`
}

func serveDNS(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("name")
	if err := validDNSName(name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	server, err := dnsServerParam(q.Get("server"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout, err := durationParam(q, "timeout", defaultCheckTimeout, maxCheckTimeout, false)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res := net.DefaultResolver
	if server != "" {
		// PreferGo with a Dial that ignores the address it is given: every query goes to server
		// over UDP, whatever resolv.conf names, which is how a test proves one DNS server is (or
		// is not) reachable from the Pod.
		res = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		}}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	start := time.Now()
	ips, err := res.LookupNetIP(ctx, "ip4", name)
	out := DNSResult{Name: name, Server: server, OK: err == nil, Addrs: []string{}, MS: time.Since(start).Milliseconds()}
	for _, ip := range ips {
		out.Addrs = append(out.Addrs, ip.Unmap().String())
	}
	if err != nil {
		out.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// dnsServerParam reads server as IP:PORT, or a bare IP meaning port 53. It must be an IP: a name
// would need a DNS server to find the DNS server.
func dnsServerParam(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if ip, err := netip.ParseAddr(v); err == nil && ip.Zone() == "" {
		return netip.AddrPortFrom(ip, 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(v)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return "", invalidParam("server", v, "must be IP:PORT (or an IP, meaning port 53)")
	}
	return ap.String(), nil
}

// validDNSName accepts what a resolver could ask for: at most 253 characters (plus a final dot),
// labels of 1-63 letters, digits, hyphens and underscores.
func validDNSName(name string) error {
	const param = "name"
	if name == "" {
		return requiredParam(param)
	}
	n := name
	if n[len(n)-1] == '.' {
		n = n[:len(n)-1]
	}
	if n == "" || len(n) > 253 {
		return invalidParam(param, name, "must be a DNS name of 1 to 253 characters")
	}
	label := 0
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '.':
			if label == 0 {
				return invalidParam(param, name, "must not have an empty label")
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return invalidParam(param, name, "must have labels of letters, digits, '-' and '_'")
		}
		if label++; label > 63 {
			return invalidParam(param, name, "must have labels of at most 63 characters")
		}
	}
	if label == 0 {
		return invalidParam(param, name, "must not have an empty label")
	}
	return nil
}
