package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRecentCreates: a child created a moment ago counts as recent until the cache shows it or
// the window passes.
func TestRecentCreates(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	type op struct {
		do  string // add, seen, has, within (cacheLag)
		key string
		at  time.Duration
	}
	cases := map[string]struct {
		ops  []op
		want []bool // the answers of the has ops
	}{
		"created, not yet seen": {ops: []op{{"add", "ns/Pod/a", 0}, {"has", "ns/Pod/a", time.Second}, {"has", "ns/Pod/b", time.Second}}, want: []bool{true, false}},
		"seen by the cache":     {ops: []op{{"add", "ns/Pod/a", 0}, {"seen", "ns/Pod/a", time.Second}, {"has", "ns/Pod/a", time.Second}}, want: []bool{false}},
		"window passed":         {ops: []op{{"add", "ns/Pod/a", 0}, {"has", "ns/Pod/a", recentCreateWindow}, {"has", "ns/Pod/a", recentCreateWindow + time.Second}}, want: []bool{true, false}},
		"lagging a moment":      {ops: []op{{"add", "ns/Pod/a", 0}, {"within", "ns/Pod/a", cacheLag}, {"within", "ns/Pod/a", cacheLag + time.Millisecond}, {"has", "ns/Pod/a", cacheLag + time.Millisecond}}, want: []bool{true, false, true}},
		"created again":         {ops: []op{{"add", "ns/Pod/a", 0}, {"seen", "ns/Pod/a", time.Second}, {"add", "ns/Pod/a", 2 * time.Second}, {"has", "ns/Pod/a", 3 * time.Second}}, want: []bool{true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c recentCreates
			var got []bool
			for _, o := range tc.ops {
				switch o.do {
				case "add":
					c.add(o.key, t0.Add(o.at))
				case "seen":
					c.seen(o.key)
				case "has":
					got = append(got, c.has(o.key, t0.Add(o.at)))
				case "within":
					got = append(got, c.within(o.key, t0.Add(o.at), cacheLag))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecentCreatesAgeOut: children the cache never shows do not pile up.
func TestRecentCreatesAgeOut(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var c recentCreates
	for i := range 5000 {
		c.add(childKey("ns", "Pod", string(rune('a'+i%26))+time.Duration(i).String()), t0.Add(time.Duration(i)*time.Second))
	}
	// Every 1,024 adds, entries older than the window go: at most a window's worth plus 1,024 remain.
	if n := len(c.at); n > int(recentCreateWindow/time.Second)+1024 {
		t.Errorf("%d entries kept", n)
	}
}
