package testimage

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// newServer serves NewHandler(cfg) on 127.0.0.1 (httptest never listens elsewhere).
func newServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(cfg))
	t.Cleanup(srv.Close)
	return srv
}

// serveHandler serves h on 127.0.0.1 and returns its URL.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// response is what a test compares of an HTTP answer.
type response struct {
	Status      int
	ContentType string
	Body        string
}

func do(t *testing.T, method, url string, body io.Reader, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(b)}
}

func get(t *testing.T, url string) response {
	t.Helper()
	return do(t, http.MethodGet, url, nil, nil)
}

// decode unmarshals a JSON answer into a T, failing the test on anything else.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if r.ContentType != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %q", r.ContentType, r.Body)
	}
	dec := json.NewDecoder(strings.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", r.Body, err)
	}
	return v
}

// closedPort returns a 127.0.0.1 port nothing listens on (over network "tcp" or "udp").
func closedPort(t *testing.T, network string) string {
	t.Helper()
	var addr net.Addr
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr()
		ln.Close()
	default:
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = pc.LocalAddr()
		pc.Close()
	}
	return addr.String()
}
