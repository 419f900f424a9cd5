package testimage

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"
)

// tcpEcho starts ServeTCPEcho on 127.0.0.1 for the test's lifetime and returns its address.
func tcpEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeTCPEcho(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// udpEcho starts ServeUDPEcho on 127.0.0.1 for the test's lifetime and returns its address.
func udpEcho(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeUDPEcho(ctx, pc) }()
	t.Cleanup(func() { cancel(); <-done })
	return pc.LocalAddr().String()
}

// silentTCP accepts connections and never writes: a peer that is reachable but does not answer.
func silentTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// silentUDP is a bound UDP socket that never answers, so nothing sends "port unreachable" either:
// the dial can only time out, as it does behind a NetworkPolicy that drops.
func silentUDP(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func TestDial(t *testing.T) {
	srv := newServer(t, Config{})
	tcpOpen, tcpClosed, tcpSilent := tcpEcho(t), closedPort(t, "tcp"), silentTCP(t)
	udpOpen, udpClosed, udpSilent := udpEcho(t), closedPort(t, "udp"), silentUDP(t)
	// outcome is what the test compares: the error text depends on the kernel, its presence not.
	type outcome struct {
		Proto, Addr, Reply string
		OK, Error          bool
	}
	cases := map[string]struct {
		reason string
		query  url.Values
		want   outcome
		// within bounds the time the answer may take.
		within time.Duration
	}{
		"tcp connect": {
			reason: "without send, an established connection is ok",
			query:  url.Values{"addr": {tcpOpen}},
			want:   outcome{Proto: "tcp", Addr: tcpOpen, OK: true},
		},
		"tcp echo": {
			reason: "with send, ok means the bytes came back",
			query:  url.Values{"proto": {"tcp"}, "addr": {tcpOpen}, "send": {"hello\n"}},
			want:   outcome{Proto: "tcp", Addr: tcpOpen, OK: true, Reply: "hello\n"},
		},
		"tcp refused": {
			reason: "a closed port is not ok",
			query:  url.Values{"proto": {"tcp"}, "addr": {tcpClosed}},
			want:   outcome{Proto: "tcp", Addr: tcpClosed, Error: true},
		},
		"tcp no answer": {
			reason: "connected but silent is not ok when an answer was asked for, after the timeout",
			query:  url.Values{"addr": {tcpSilent}, "send": {"hello"}, "timeout": {"300ms"}},
			want:   outcome{Proto: "tcp", Addr: tcpSilent, Error: true},
			within: 3 * time.Second,
		},
		"tcp silent without send": {
			reason: "connected is enough when nothing was sent",
			query:  url.Values{"addr": {tcpSilent}},
			want:   outcome{Proto: "tcp", Addr: tcpSilent, OK: true},
		},
		"udp echo": {
			reason: "a reply datagram is ok; without send the payload is ping",
			query:  url.Values{"proto": {"udp"}, "addr": {udpOpen}},
			want:   outcome{Proto: "udp", Addr: udpOpen, OK: true, Reply: "ping"},
		},
		"udp echo send": {
			reason: "send is the datagram",
			query:  url.Values{"proto": {"udp"}, "addr": {udpOpen}, "send": {"hi there"}},
			want:   outcome{Proto: "udp", Addr: udpOpen, OK: true, Reply: "hi there"},
		},
		"udp refused": {
			reason: "a port with nothing bound is not ok",
			query:  url.Values{"proto": {"udp"}, "addr": {udpClosed}, "timeout": {"500ms"}},
			want:   outcome{Proto: "udp", Addr: udpClosed, Error: true},
			within: 3 * time.Second,
		},
		"udp no answer": {
			reason: "no reply within the timeout is not ok",
			query:  url.Values{"proto": {"udp"}, "addr": {udpSilent}, "timeout": {"300ms"}},
			want:   outcome{Proto: "udp", Addr: udpSilent, Error: true},
			within: 3 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := decode[DialResult](t, get(t, srv.URL+"/dial?"+tc.query.Encode()))
			took := time.Since(start)
			got := outcome{Proto: res.Proto, Addr: res.Addr, Reply: res.Reply, OK: res.OK, Error: res.Error != ""}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s\nerror: %s", tc.reason, diff, res.Error)
			}
			if tc.within != 0 && took > tc.within {
				t.Errorf("%s: took %v, want at most %v", tc.reason, took, tc.within)
			}
			if res.MS < 0 || time.Duration(res.MS)*time.Millisecond > took {
				t.Errorf("ms = %d, but the whole request took %v", res.MS, took)
			}
		})
	}
}

// dnsResponder answers A queries on 127.0.0.1 over UDP: records' names get their address, other
// names NXDOMAIN. It is what a cluster DNS server is to /dns, without leaving the machine.
func dnsResponder(t *testing.T, records map[string]netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			resp := dnsmessage.Message{
				Header:    dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true},
				Questions: []dnsmessage.Question{q},
			}
			addr, ok := records[q.Name.String()]
			switch {
			case !ok:
				resp.RCode = dnsmessage.RCodeNameError
			case q.Type == dnsmessage.TypeA:
				resp.Answers = []dnsmessage.Resource{{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: addr.As4()},
				}}
			}
			b, err := resp.Pack()
			if err != nil {
				continue
			}
			_, _ = pc.WriteTo(b, from)
		}
	}()
	return pc.LocalAddr().String()
}

func TestDNS(t *testing.T) {
	srv := newServer(t, Config{})
	server := dnsResponder(t, map[string]netip.Addr{"web.sandbox.test.": netip.MustParseAddr("10.1.2.3")})
	closed, silent := closedPort(t, "udp"), silentUDP(t)
	type outcome struct {
		Name, Server string
		OK, Error    bool
		Addrs        []string
	}
	cases := map[string]struct {
		reason string
		query  url.Values
		want   outcome
		within time.Duration
	}{
		"found": {
			reason: "the A record of the server named in the request",
			query:  url.Values{"name": {"web.sandbox.test"}, "server": {server}},
			want:   outcome{Name: "web.sandbox.test", Server: server, OK: true, Addrs: []string{"10.1.2.3"}},
		},
		"found absolute": {
			reason: "a fully qualified name resolves the same",
			query:  url.Values{"name": {"web.sandbox.test."}, "server": {server}},
			want:   outcome{Name: "web.sandbox.test.", Server: server, OK: true, Addrs: []string{"10.1.2.3"}},
		},
		"nxdomain": {
			reason: "an unknown name is not ok, and has no addresses",
			query:  url.Values{"name": {"missing.sandbox.test."}, "server": {server}},
			want:   outcome{Name: "missing.sandbox.test.", Server: server, Error: true, Addrs: []string{}},
		},
		"server refused": {
			reason: "a server port with nothing bound is not ok",
			query:  url.Values{"name": {"web.sandbox.test."}, "server": {closed}, "timeout": {"500ms"}},
			want:   outcome{Name: "web.sandbox.test.", Server: closed, Error: true, Addrs: []string{}},
			within: 3 * time.Second,
		},
		"server silent": {
			reason: "a server that never answers is not ok, after the timeout",
			query:  url.Values{"name": {"web.sandbox.test."}, "server": {silent}, "timeout": {"300ms"}},
			want:   outcome{Name: "web.sandbox.test.", Server: silent, Error: true, Addrs: []string{}},
			within: 3 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := decode[DNSResult](t, get(t, srv.URL+"/dns?"+tc.query.Encode()))
			took := time.Since(start)
			got := outcome{Name: res.Name, Server: res.Server, OK: res.OK, Error: res.Error != "", Addrs: res.Addrs}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s\nerror: %s", tc.reason, diff, res.Error)
			}
			if tc.within != 0 && took > tc.within {
				t.Errorf("%s: took %v, want at most %v", tc.reason, took, tc.within)
			}
		})
	}
}

func TestDNSServerParam(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"empty means the system resolver": {in: "", want: ""},
		"ip and port":                     {in: "10.96.0.10:53", want: "10.96.0.10:53"},
		"bare ip means port 53":           {in: "10.96.0.10", want: "10.96.0.10:53"},
		"ipv6 and port":                   {in: "[fd00::a]:5353", want: "[fd00::a]:5353"},
		"bare ipv6":                       {in: "fd00::a", want: "[fd00::a]:53"},
		"a name":                          {in: "kube-dns:53", wantErr: true},
		"port 0":                          {in: "10.96.0.10:0", wantErr: true},
		"port too big":                    {in: "10.96.0.10:65536", wantErr: true},
		"zone":                            {in: "fe80::1%eth0", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := dnsServerParam(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("dnsServerParam(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("dnsServerParam(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
