package router_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// FuzzHeaders sends arbitrary routing headers through the whole Handler to a real backend.
// Whatever the input: no panic; a request ParseHeaders refuses is a 400 naming a routing header
// and reaches neither the resolver nor the sandbox; an accepted one satisfies the contract
// (DNS-1123 labels, port in range, Pod IP not loopback or link-local). The seeds run in every
// plain `go test`; `go test -fuzz FuzzHeaders ./router` explores further.
func FuzzHeaders(f *testing.F) {
	seeds := [][5]string{
		{"sb", "", "", "", ""},
		{"sb", "default", "8888", "0f6c0a52-8a47-4ab4-9c9e-4d2b6a1d3c2e", "10.0.0.1"},
		{"", "", "", "", ""},
		{"a.evil.com", "", "", "", ""},
		{"sb", "../kube-system", "", "", ""},
		{"sb", "", "0", "", ""},
		{"sb", "", "65536", "", ""},
		{"sb", "", "-1", "", ""},
		{"sb", "", "8888 ", "", ""},
		{"sb", "", "", "", "127.0.0.1"},
		{"sb", "", "", "", "169.254.169.254"},
		{"sb", "", "", "", "[::1]"},
		{"sb", "", "", "", "fe80::1%eth0"},
		{"sb", "", "", "x\x00y", ""},
		{"SB", "Default", "", "", ""},
		{"sb\r\nX-Injected: 1", "", "", "", ""},
		{strings.Repeat("a", 64), "", "", "", ""},
		{"sb", "", "", strings.Repeat("u", 129), ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	e := newEnv(f, echo, nil)
	f.Fuzz(func(t *testing.T, id, ns, port, uid, podIP string) {
		h := http.Header{}
		for k, v := range map[string]string{router.HeaderID: id, router.HeaderNamespace: ns, router.HeaderPort: port, router.HeaderUID: uid, router.HeaderPodIP: podIP} {
			if v != "" {
				h[http.CanonicalHeaderKey(k)] = []string{v}
			}
		}
		parsed, perr := router.ParseHeaders(h)
		if perr == nil {
			checkAccepted(t, parsed)
		} else if perr.Status != 400 || perr.Reason != router.ReasonInvalidHeader || !strings.HasPrefix(perr.Header, "X-Sandbox-") {
			t.Fatalf("refusal %+v: want a 400 InvalidHeader naming an X-Sandbox- header", perr)
		}

		if perr == nil {
			return // accepted headers are forwarded; TestForwardsRequest covers that path
		}
		// The refused headers through the Handler (in process: header values a client
		// library would refuse to send still reach it).
		hitsBefore, callsBefore := e.hits.Load(), e.resolver.calls.Load()
		r := httptest.NewRequest(http.MethodGet, "/fuzz", nil)
		r.Header = h
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		if w.Code != 400 {
			t.Fatalf("handler answered %d for headers ParseHeaders refuses (%s)", w.Code, perr.Detail)
		}
		if e.hits.Load() != hitsBefore || e.resolver.calls.Load() != callsBefore {
			t.Fatalf("an invalid header (%s) was resolved or forwarded", perr.Detail)
		}
	})
}

func checkAccepted(t *testing.T, r router.Request) {
	t.Helper()
	for _, label := range []string{r.Name, r.Namespace} {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
			strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			t.Fatalf("accepted %q, not a DNS-1123 label", label)
		}
	}
	if r.Port < 1 || r.Port > 65535 {
		t.Fatalf("accepted port %d", r.Port)
	}
	if ip := r.PodIP; ip.IsValid() && (ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() || ip.Is4In6()) {
		t.Fatalf("accepted Pod IP %s", ip)
	}
}
