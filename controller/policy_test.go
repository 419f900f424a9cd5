package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPolicy holds each of the scheduling policy's decisions to its table, at the default
// timings, with the clock a value.
func TestPolicy(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	p := newPolicy(0)
	held := heldPass{since: t0}
	woken := heldPass{}

	cases := map[string]struct {
		reason string
		got    any
		want   any
	}{
		"DefaultHold": {
			reason: "0 is --background-hold's default, a negative turns the gate off",
			got:    []any{newPolicy(0).maxHold, newPolicy(0).gating(), newPolicy(-1).gating(), newPolicy(3 * time.Second).maxHold},
			want:   []any{DefaultBackgroundHold, true, false, 3 * time.Second},
		},
		"Open": {
			reason: "open with nothing in flight and quiet past the last foreground write; closed at quiet minus a moment",
			got: []bool{p.open(0, t0, at(defaultQuiet)), p.open(0, t0, at(defaultQuiet-time.Millisecond)),
				p.open(1, t0, at(time.Hour))},
			want: []bool{true, false, false},
		},
		"LetThrough": {
			reason: "an open gate lets any pass through; a closed one a woken pass, or one held maxHold unless patient",
			got: []bool{
				p.letThrough(heldPass{}, false, true, false, t0),
				p.letThrough(heldPass{}, false, false, false, t0),
				p.letThrough(woken, true, false, true, t0),
				p.letThrough(held, true, false, false, at(DefaultBackgroundHold)),
				p.letThrough(held, true, false, false, at(DefaultBackgroundHold-time.Millisecond)),
				p.letThrough(heldPass{since: t0, patient: true}, true, false, true, at(time.Hour)),
			},
			want: []bool{true, false, true, true, false, false},
		},
		"Wake": {
			reason: "the tick wakes a held pass once: when the gate opens, or after maxHold unless patient",
			got: []bool{
				p.wake(held, true, t0),
				p.wake(held, false, at(DefaultBackgroundHold)),
				p.wake(heldPass{since: t0, patient: true}, false, at(time.Hour)),
				p.wake(woken, true, t0),
			},
			want: []bool{true, true, false, false},
		},
		"HoldEvent": {
			reason: "an event waits while the gate is closed, up to maxHeldEvents",
			got:    []bool{p.holdEvent(0, false), p.holdEvent(maxHeldEvents, false), p.holdEvent(0, true)},
			want:   []bool{true, false, false},
		},
		"ReleaseEvents": {
			reason: "eventsPerTick at most; all that fit when open, only those held maxHold when closed",
			got: []int{
				p.releaseEvents(make([]time.Time, eventsPerTick+5), true, t0),
				p.releaseEvents([]time.Time{t0, at(time.Second), at(5 * time.Second)}, false, at(DefaultBackgroundHold+time.Second)),
				p.releaseEvents([]time.Time{t0}, false, at(time.Second)),
			},
			want: []int{eventsPerTick, 2, 0},
		},
		"Retries": {
			reason: "a held pass comes back just past maxHold, an awaiting one after awaitCacheRetry; the tick is quiet/2",
			got:    []time.Duration{p.heldRetry(), awaitCacheRetry, p.tick()},
			want:   []time.Duration{DefaultBackgroundHold + time.Second, time.Second, defaultQuiet / 2},
		},
		"PendingCreate": {
			reason: "a create of ours the cache has not shown is awaited within cacheLag, read after, forgotten after the window",
			got: []pendingCreate{
				p.pending(time.Time{}, t0),
				p.pending(t0, at(cacheLag)),
				p.pending(t0, at(cacheLag+time.Millisecond)),
				p.pending(t0, at(expectationWindow)),
				p.pending(t0, at(expectationWindow+time.Millisecond)),
			},
			want: []pendingCreate{createAnew, awaitCache, readFirst, readFirst, createAnew},
		},
		"Expired": {
			reason: "a create or delete is expected for expectationWindow",
			got:    []bool{p.expired(time.Time{}, t0), p.expired(t0, at(expectationWindow)), p.expired(t0, at(expectationWindow+time.Millisecond))},
			want:   []bool{false, false, true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
