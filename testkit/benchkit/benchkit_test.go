package benchkit

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseWrites(t *testing.T) {
	body := []byte(`# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="agents.x-k8s.io",resource="sandboxes",scope="resource",subresource="",verb="APPLY",version="v1beta1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="agents.x-k8s.io",resource="sandboxes",scope="resource",subresource="",verb="APPLY",version="v1beta1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="extensions.agents.x-k8s.io",resource="sandboxclaims",scope="resource",subresource="status",verb="PATCH",version="v1beta1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="APPLY",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 11
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 4
`)
	want := Counts{"sandboxes APPLY": 9, "sandboxclaims/status PATCH": 3, "events POST": 4}
	if diff := cmp.Diff(want, ParseWrites(body)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	all := Counts{"sandboxes APPLY 201": 7, "sandboxes APPLY 409": 2, "sandboxclaims/status PATCH 200": 3, "pods LIST 200": 11, "events POST 201": 4}
	if diff := cmp.Diff(all, parseRequests(body, nil, true)); diff != "" {
		t.Errorf("every request, by code (-want +got):\n%s", diff)
	}
}

func TestSince(t *testing.T) {
	before := Counts{"sandboxes APPLY": 2, "events POST": 1}
	after := Counts{"sandboxes APPLY": 5, "events POST": 4, "pods APPLY": 1}
	got, total := after.Since(before, func(k string) bool { return k != "events POST" })
	if diff := cmp.Diff(Counts{"sandboxes APPLY": 3, "pods APPLY": 1}, got); diff != "" || total != 4 {
		t.Errorf("since (-want +got):\n%s\ntotal %v", diff, total)
	}
}

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	cases := map[string]struct {
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		"none":            {nil, 0.5, 0},
		"one":             {ms(7), 0.99, 7 * time.Millisecond},
		"median of odd":   {ms(3, 1, 2), 0.5, 2 * time.Millisecond},
		"median of even":  {ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		"p99 of hundred":  {ms(hundred...), 0.99, 99 * time.Millisecond},
		"p90 of hundred":  {ms(hundred...), 0.90, 90 * time.Millisecond},
		"p100 is the max": {ms(hundred...), 1, 100 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Quantile(tc.ds, tc.q); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadProcess(t *testing.T) {
	p, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.RSSMiB <= 0 || p.PeakRSSMiB < p.RSSMiB {
		t.Errorf("resident set %.1f MiB, peak %.1f MiB", p.RSSMiB, p.PeakRSSMiB)
	}
	if _, err := ReadProcess(1 << 30); err == nil {
		t.Error("a process that does not exist was read")
	}
}
