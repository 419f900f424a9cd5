package testimage

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// event is one parsed server-sent event.
type event struct {
	ID, Data string
}

// readEvent reads the next event of a text/event-stream, or returns false at the end.
func readEvent(t *testing.T, br *bufio.Reader) (event, bool) {
	t.Helper()
	var ev event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if line != "" {
				t.Fatalf("a partial line at the end of the stream: %q", line)
			}
			return ev, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev, true
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

func TestSSE(t *testing.T) {
	srv := newServer(t, Config{PodName: "web-0"})
	cases := map[string]struct {
		reason   string
		query    string
		interval time.Duration
		want     []event
	}{
		"defaults": {
			reason: "five events 200ms apart",
			query:  "", interval: 200 * time.Millisecond,
			want: []event{{"1", "1 web-0"}, {"2", "2 web-0"}, {"3", "3 web-0"}, {"4", "4 web-0"}, {"5", "5 web-0"}},
		},
		"spaced": {
			reason: "each event is flushed when written: the first arrives before the stream could have ended",
			query:  "?n=3&interval=400ms", interval: 400 * time.Millisecond,
			want: []event{{"1", "1 web-0"}, {"2", "2 web-0"}, {"3", "3 web-0"}},
		},
		"back to back": {
			reason: "interval 0 sends all events at once",
			query:  "?n=2&interval=0s",
			want:   []event{{"1", "1 web-0"}, {"2", "2 web-0"}},
		},
		"none": {
			reason: "n=0 is an empty stream",
			query:  "?n=0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, err := http.Get(srv.URL + "/sse" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, ct)
			}
			br := bufio.NewReader(resp.Body)
			var got []event
			var arrived []time.Duration
			for {
				ev, ok := readEvent(t, br)
				if !ok {
					break
				}
				got = append(got, ev)
				arrived = append(arrived, time.Since(start))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if len(got) < 2 || tc.interval == 0 {
				return
			}
			whole := time.Duration(len(got)-1) * tc.interval
			if arrived[0] >= whole {
				t.Errorf("%s: the first event arrived after %v, when the whole stream takes %v", tc.reason, arrived[0], whole)
			}
			if last := arrived[len(arrived)-1]; last < whole {
				t.Errorf("the last event arrived after %v, before the %v the intervals add up to", last, whole)
			}
		})
	}
}

// TestSSEStopsWhenClientLeaves checks a stream ends on the server once its client goes away,
// rather than writing into the void for its whole length.
func TestSSEStopsWhenClientLeaves(t *testing.T) {
	returned := make(chan struct{})
	h := NewHandler(Config{PodName: "web-0"})
	url := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		h.ServeHTTP(w, r)
	}))
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/sse?n=1000&interval=10s", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ev, ok := readEvent(t, bufio.NewReader(resp.Body)); !ok || ev.ID != "1" {
		t.Fatalf("first event = %+v, %v", ev, ok)
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler still streams 5s after its client left")
	}
}
