package testimage

import (
	"bytes"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEcho(t *testing.T) {
	srv := newServer(t, Config{PodName: "web-0", Namespace: "team-a"})
	cases := map[string]struct {
		reason string
		method string
		path   string
		header http.Header
		want   Echo
	}{
		"root": {
			reason: "/ reports the Pod and no headers when none were sent",
			method: http.MethodGet, path: "/",
			want: Echo{Pod: "web-0", Namespace: "team-a", Method: "GET", Path: "/"},
		},
		"routing headers": {
			reason: "the headers a router test asserts on are echoed; Authorization only as present",
			method: http.MethodGet, path: "/",
			header: http.Header{
				"X-Sandbox-Id":     {"sb"},
				"X-Forwarded-For":  {"10.0.0.1", "10.0.0.2"},
				"X-Forwarded-Host": {"router.example"},
				"Authorization":    {"Bearer secret"},
				"X-Other":          {"not echoed"},
			},
			want: Echo{Pod: "web-0", Namespace: "team-a", Method: "GET", Path: "/", Headers: EchoHeaders{
				SandboxID: "sb", ForwardedFor: "10.0.0.1, 10.0.0.2", ForwardedHost: "router.example", Authorization: true,
			}},
		},
		"unknown path": {
			reason: "any path the router forwards answers like /, with the path and query echoed",
			method: http.MethodPost, path: "/api/v1/things?x=1&y=2",
			want: Echo{Pod: "web-0", Namespace: "team-a", Method: "POST", Path: "/api/v1/things", Query: "x=1&y=2"},
		},
		"near an endpoint": {
			reason: "only exact endpoint paths are endpoints",
			method: http.MethodGet, path: "/healthz/deeper",
			want: Echo{Pod: "web-0", Namespace: "team-a", Method: "GET", Path: "/healthz/deeper"},
		},
		"files without a slash": {
			reason: "/files itself is not the files endpoint",
			method: http.MethodGet, path: "/files",
			want: Echo{Pod: "web-0", Namespace: "team-a", Method: "GET", Path: "/files"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := do(t, tc.method, srv.URL+tc.path, nil, tc.header)
			if r.Status != http.StatusOK {
				t.Fatalf("%s: status %d, body %s", tc.reason, r.Status, r.Body)
			}
			if diff := cmp.Diff(tc.want, decode[Echo](t, r)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPlainEndpoints(t *testing.T) {
	t.Setenv("TESTIMAGE_TEST_VAR", "some value")
	resolv, resolvErr := os.ReadFile(resolvConfPath)
	srv := newServer(t, Config{PodName: "web-0"})
	cases := map[string]struct {
		reason string
		method string
		path   string
		want   response
		skip   string
	}{
		"healthz": {
			reason: "the probe endpoint answers ok as text",
			method: http.MethodGet, path: "/healthz",
			want: response{Status: 200, ContentType: "text/plain; charset=utf-8", Body: "ok"},
		},
		"healthz head": {
			reason: "probes may use HEAD",
			method: http.MethodHead, path: "/healthz",
			want: response{Status: 200, ContentType: "text/plain; charset=utf-8"},
		},
		"env set": {
			reason: "env reports a variable of the process",
			method: http.MethodGet, path: "/env?name=TESTIMAGE_TEST_VAR",
			want: response{Status: 200, ContentType: "application/json", Body: `{"name":"TESTIMAGE_TEST_VAR","value":"some value"}` + "\n"},
		},
		"env unset": {
			reason: "an unset variable reads as empty",
			method: http.MethodGet, path: "/env?name=TESTIMAGE_TEST_UNSET",
			want: response{Status: 200, ContentType: "application/json", Body: `{"name":"TESTIMAGE_TEST_UNSET","value":""}` + "\n"},
		},
		"resolv.conf": {
			reason: "resolv.conf is served as it is on disk",
			method: http.MethodGet, path: "/resolv.conf",
			want: response{Status: 200, ContentType: "text/plain; charset=utf-8", Body: string(resolv)},
			skip: func() string {
				if resolvErr != nil {
					return "this machine has no readable " + resolvConfPath
				}
				return ""
			}(),
		},
		"post healthz": {
			reason: "endpoints refuse methods they do not serve, with a JSON error",
			method: http.MethodPost, path: "/healthz",
			want: response{Status: 405, ContentType: "application/json", Body: `{"error":"method POST not allowed on /healthz"}` + "\n"},
		},
		"delete files": {
			reason: "files are read and written, never deleted",
			method: http.MethodDelete, path: "/files/a",
			want: response{Status: 405, ContentType: "application/json", Body: `{"error":"method DELETE not allowed on /files/a"}` + "\n"},
		},
		"post dial": {
			reason: "dial is a GET",
			method: http.MethodPost, path: "/dial?addr=127.0.0.1:1",
			want: response{Status: 405, ContentType: "application/json", Body: `{"error":"method POST not allowed on /dial"}` + "\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			got := do(t, tc.method, srv.URL+tc.path, nil, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestBadParameters checks that every malformed query parameter is a 400 whose error names the
// parameter, and that nothing is dialled or resolved for it.
func TestBadParameters(t *testing.T) {
	srv := newServer(t, Config{PodName: "web-0", DataDir: t.TempDir()})
	cases := map[string]struct {
		path  string
		param string
	}{
		"dial bad proto":       {"/dial?proto=sctp&addr=127.0.0.1:1", "proto"},
		"dial no addr":         {"/dial?proto=tcp", "addr"},
		"dial addr no port":    {"/dial?addr=127.0.0.1", "addr"},
		"dial addr no host":    {"/dial?addr=:80", "addr"},
		"dial addr port 0":     {"/dial?addr=127.0.0.1:0", "addr"},
		"dial addr port big":   {"/dial?addr=127.0.0.1:65536", "addr"},
		"dial addr port name":  {"/dial?addr=127.0.0.1:http", "addr"},
		"dial bad timeout":     {"/dial?addr=127.0.0.1:1&timeout=soon", "timeout"},
		"dial zero timeout":    {"/dial?addr=127.0.0.1:1&timeout=0s", "timeout"},
		"dial negative":        {"/dial?addr=127.0.0.1:1&timeout=-1s", "timeout"},
		"dial long timeout":    {"/dial?addr=127.0.0.1:1&timeout=31s", "timeout"},
		"dns no name":          {"/dns?server=127.0.0.1:1", "name"},
		"dns bad name":         {"/dns?name=a..b&server=127.0.0.1:1", "name"},
		"dns name with space":  {"/dns?name=a%20b&server=127.0.0.1:1", "name"},
		"dns long label":       {"/dns?name=" + strings.Repeat("a", 64) + ".test&server=127.0.0.1:1", "name"},
		"dns only a dot":       {"/dns?name=.&server=127.0.0.1:1", "name"},
		"dns server name":      {"/dns?name=a.test&server=dns.example:53", "server"},
		"dns server port 0":    {"/dns?name=a.test&server=127.0.0.1:0", "server"},
		"dns server bad port":  {"/dns?name=a.test&server=127.0.0.1:x", "server"},
		"dns bad timeout":      {"/dns?name=a.test&server=127.0.0.1:1&timeout=2", "timeout"},
		"sse bad n":            {"/sse?n=many", "n"},
		"sse negative n":       {"/sse?n=-1", "n"},
		"sse too many":         {"/sse?n=1001", "n"},
		"sse bad interval":     {"/sse?interval=fast", "interval"},
		"sse long interval":    {"/sse?interval=11s", "interval"},
		"env no name":          {"/env", "name"},
		"file dot dot":         {"/files/..", "name"},
		"file dot":             {"/files/.", "name"},
		"file empty":           {"/files/", "name"},
		"file slash":           {"/files/a%2Fb", "name"},
		"file subdirectory":    {"/files/a/b", "name"},
		"file bad character":   {"/files/a%20b", "name"},
		"file unicode":         {"/files/%C3%A9t%C3%A9", "name"},
		"file nul":             {"/files/a%00", "name"},
		"file long":            {"/files/" + strings.Repeat("a", 256), "name"},
		"file backslash":       {"/files/a%5Cb", "name"},
		"file percent escaped": {"/files/%2E%2E", "name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := get(t, srv.URL+tc.path)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", r.Status, r.Body)
			}
			if e := decode[ErrorBody](t, r); !strings.HasPrefix(e.Error, tc.param+": ") {
				t.Errorf("error %q does not name the parameter %s", e.Error, tc.param)
			}
		})
	}
}

func TestLogRequests(t *testing.T) {
	var out bytes.Buffer
	h := LogRequests(NewHandler(Config{}), &out)
	srvURL := serveHandler(t, h)
	get(t, srvURL+"/healthz")
	get(t, srvURL+"/dial?proto=x")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\S+Z GET "/healthz" 200 2B \S+ 127\.0\.0\.1:\d+$`),
		regexp.MustCompile(`^\S+Z GET "/dial\?proto=x" 400 \d+B \S+ 127\.0\.0\.1:\d+$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want one per request:\n%s", len(lines), out.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %s", i, lines[i], re)
		}
	}
}
