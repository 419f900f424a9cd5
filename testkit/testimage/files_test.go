package testimage

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sizedReader hides its length from http.NewRequest, so the body goes chunked and the 1 MiB limit
// must be enforced while reading, not from Content-Length.
type sizedReader struct{ io.Reader }

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, Config{PodName: "web-0", DataDir: dir})
	big := strings.Repeat("x", MaxFileSize)
	// The steps run in order against one DataDir: each sees what the ones before it wrote.
	steps := []struct {
		reason string
		method string
		name   string
		body   io.Reader
		want   response
	}{{
		reason: "a file nobody wrote is 404",
		method: http.MethodGet, name: "a.txt",
		want: response{Status: 404, ContentType: "application/json", Body: `{"error":"no file \"a.txt\""}` + "\n"},
	}, {
		reason: "PUT creates the file and reports its size",
		method: http.MethodPut, name: "a.txt", body: strings.NewReader("first"),
		want: response{Status: 200, ContentType: "application/json", Body: `{"name":"a.txt","size":5}` + "\n"},
	}, {
		reason: "GET returns the bytes",
		method: http.MethodGet, name: "a.txt",
		want: response{Status: 200, ContentType: "application/octet-stream", Body: "first"},
	}, {
		reason: "PUT replaces",
		method: http.MethodPut, name: "a.txt", body: strings.NewReader("second, longer"),
		want: response{Status: 200, ContentType: "application/json", Body: `{"name":"a.txt","size":14}` + "\n"},
	}, {
		reason: "GET sees the replacement",
		method: http.MethodGet, name: "a.txt",
		want: response{Status: 200, ContentType: "application/octet-stream", Body: "second, longer"},
	}, {
		reason: "an empty file is a file",
		method: http.MethodPut, name: "Empty_1.-", body: strings.NewReader(""),
		want: response{Status: 200, ContentType: "application/json", Body: `{"name":"Empty_1.-","size":0}` + "\n"},
	}, {
		reason: "exactly 1 MiB is accepted",
		method: http.MethodPut, name: "big", body: strings.NewReader(big),
		want: response{Status: 200, ContentType: "application/json", Body: `{"name":"big","size":1048576}` + "\n"},
	}, {
		reason: "one byte more is 413 from Content-Length",
		method: http.MethodPut, name: "big", body: strings.NewReader(big + "y"),
		want: response{Status: 413, ContentType: "application/json", Body: `{"error":"the body has 1048577 bytes, more than 1048576"}` + "\n"},
	}, {
		reason: "one byte more is 413 when the body is chunked",
		method: http.MethodPut, name: "big", body: sizedReader{strings.NewReader(big + "y")},
		want: response{Status: 413, ContentType: "application/json", Body: `{"error":"the body has more than 1048576 bytes"}` + "\n"},
	}, {
		reason: "a refused PUT leaves the file as it was",
		method: http.MethodHead, name: "big",
		want: response{Status: 200, ContentType: "application/octet-stream"},
	}}
	for i, s := range steps {
		got := do(t, s.method, srv.URL+"/files/"+s.name, s.body, nil)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("step %d, %s %s: %s (-want +got):\n%s", i, s.method, s.name, s.reason, diff)
		}
	}
	b, err := os.ReadFile(dir + "/big")
	if err != nil || len(b) != MaxFileSize {
		t.Errorf("big on disk: %d bytes, %v; want %d", len(b), err, MaxFileSize)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"Empty_1.-", "a.txt", "big"}, names); diff != "" {
		t.Errorf("DataDir holds the written files and no temporary ones (-want +got):\n%s", diff)
	}
}

func TestFilesErrors(t *testing.T) {
	cases := map[string]struct {
		reason  string
		dataDir string
		method  string
		want    int
	}{
		"no data dir get": {
			reason: "without DATA_DIR the endpoint is unavailable, not rooted somewhere surprising",
			method: http.MethodGet, want: http.StatusServiceUnavailable,
		},
		"no data dir put": {
			reason: "without DATA_DIR nothing is written",
			method: http.MethodPut, want: http.StatusServiceUnavailable,
		},
		"missing data dir": {
			reason:  "an unmounted volume is an error, not a directory created in its place",
			dataDir: "/nonexistent/testimage", method: http.MethodPut, want: http.StatusInternalServerError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, Config{DataDir: tc.dataDir})
			r := do(t, tc.method, srv.URL+"/files/x", strings.NewReader("body"), nil)
			if r.Status != tc.want {
				t.Fatalf("%s: status %d, want %d; body %s", tc.reason, r.Status, tc.want, r.Body)
			}
			if e := decode[ErrorBody](t, r); e.Error == "" {
				t.Errorf("%s: empty error", tc.reason)
			}
		})
	}
}
