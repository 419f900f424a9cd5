package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestExpectations: what the controller remembers of its writes until the cache shows them, and
// when it lets go, one kind of memory at a time.
func TestExpectations(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	pod := keyOf("Pod", "ns", "a")
	sb := keyOf("Sandbox", "ns", "a")
	pool := keyOf("SandboxWarmPool", "ns", "p")
	claim := keyOf("SandboxClaim", "ns", "c")
	member := keyOf("Sandbox", "ns", "p-1")

	cases := map[string]struct {
		reason string
		do     func(e *expectations) []any
		want   []any
	}{
		"a create awaited, then seen": {
			reason: "a child created a moment ago is awaited within cacheLag, read within the window, forgotten once the cache shows it",
			do: func(e *expectations) []any {
				e.created(pod, sb, "sb-uid", at(0))
				out := []any{e.p.pending(e.createdAt(pod), at(time.Second)), e.p.pending(e.createdAt(pod), at(cacheLag+time.Millisecond)),
					e.p.pending(e.createdAt(pod), at(expectationWindow+time.Second))}
				e.seen(pod, true)
				return append(out, e.p.pending(e.createdAt(pod), at(time.Second)))
			},
			want: []any{awaitCache, readFirst, createAnew, createAnew},
		},
		"a pool's creates and deletes": {
			reason: "a create is met when the cache shows the name, a delete when it no longer does, either after the window",
			do: func(e *expectations) []any {
				e.created(keyOf("Sandbox", "ns", "p-new"), pool, "pool-uid", at(0))
				e.deleted(member, pool, at(0))
				present := map[string]bool{"p-1": true}
				c1, d1 := e.pending(pool, func(k objectKey) bool { return present[k.name] }, at(time.Second), 30*time.Second)
				present = map[string]bool{"p-new": true}
				c2, d2 := e.pending(pool, func(k objectKey) bool { return present[k.name] }, at(2*time.Second), 30*time.Second)
				return []any{c1, d1, c2, d2}
			},
			want: []any{[]string{"p-new"}, []string{"p-1"}, []string(nil), []string(nil)},
		},
		"expected writes expire": {
			reason: "a create the cache never shows (its object deleted at once) is no longer expected after the window",
			do: func(e *expectations) []any {
				e.created(keyOf("Sandbox", "ns", "p-new"), pool, "pool-uid", at(0))
				c, _ := e.pending(pool, func(objectKey) bool { return false }, at(31*time.Second), 30*time.Second)
				return []any{c}
			},
			want: []any{[]string(nil)},
		},
		"a claim's Sandbox, acquired": {
			reason: "the Sandbox a claim's pass created or adopted is its own until the cache shows it; another claim of the name is another",
			do: func(e *expectations) []any {
				e.wroteOn(member, claim, "claim-uid", "7")
				name, ok := e.acquired(claim, "claim-uid", "Sandbox")
				_, other := e.acquired(claim, "other-uid", "Sandbox")
				e.release(claim)
				_, after := e.acquired(claim, "claim-uid", "Sandbox")
				return []any{name, ok, other, after}
			},
			want: []any{"p-1", true, false, false},
		},
		"a write on a version": {
			reason: "while the cache shows the version a write started from, the object as cached is stale; once it moves on, the write is forgotten",
			do: func(e *expectations) []any {
				e.wroteOn(statusKey(claim), objectKey{}, "", "41")
				return []any{e.stale(statusKey(claim), "41"), e.stale(statusKey(claim), "42"), e.stale(statusKey(claim), "41")}
			},
			want: []any{true, false, false},
		},
		"writes in flight": {
			reason: "one holder at a time sends a write on a version to an object",
			do: func(e *expectations) []any {
				out := []any{e.begin(member, "a"), e.begin(member, "a"), e.begin(member, "b"), e.busy(member, "b"), e.busy(member, "a")}
				e.end(member, "b") // not b's: changes nothing
				out = append(out, e.busy(member, "b"))
				e.end(member, "a")
				return append(out, e.busy(member, "b"), e.begin(member, "b"))
			},
			want: []any{true, true, false, true, false, true, false, true},
		},
		"the members a claim may be offered": {
			reason: "a member the cache shows at the version an adoption started from, or another claim's adoption is in flight on, is left out; one the cache shows past the write is offered, and the write forgotten",
			do: func(e *expectations) []any {
				members := []*metav1.ObjectMeta{{Namespace: "ns", Name: "p-1", ResourceVersion: "7"}, {Namespace: "ns", Name: "p-2", ResourceVersion: "3"},
					{Namespace: "ns", Name: "p-3", ResourceVersion: "9"}, {Namespace: "ns", Name: "p-4", ResourceVersion: "1"}}
				key := func(ns, name string) objectKey { return keyOf("Sandbox", ns, name) }
				e.wroteOn(member, claim, "claim-uid", "7")                        // p-1, still at 7
				e.wroteOn(keyOf("Sandbox", "ns", "p-3"), claim, "claim-uid", "8") // the cache shows 9
				e.begin(keyOf("Sandbox", "ns", "p-2"), "other-claim")
				names := func(ms []*metav1.ObjectMeta) (out []string) {
					for _, m := range ms {
						out = append(out, m.Name)
					}
					return out
				}
				first := names(current(e, key, members, "claim-uid"))
				return []any{first, e.stale(keyOf("Sandbox", "ns", "p-3"), "8"), names(current(e, key, members, "other-claim"))}
			},
			want: []any{[]string{"p-3", "p-4"}, false, []string{"p-2", "p-3", "p-4"}},
		},
		"first Ready": {
			reason: "an object counts its first Ready once; one made again under its name counts again",
			do: func(e *expectations) []any {
				return []any{e.firstReady(sb, "u1"), e.firstReady(sb, "u1"), e.firstReady(sb, "u2")}
			},
			want: []any{true, false, true},
		},
		"annotations applied": {
			reason: "upstream's annotations applied show until the object goes; an object of another UID has none",
			do: func(e *expectations) []any {
				e.applied(claim, "u1", map[string]string{"k": "v"})
				out := []any{e.annotations(claim, "u1"), e.annotations(claim, "u2")}
				e.forget(claim)
				return append(out, e.annotations(claim, "u1"))
			},
			want: []any{map[string]string{"k": "v"}, map[string]string(nil), map[string]string(nil)},
		},
		"a refusal reported": {
			reason: "the refusal last reported stands until another, or none",
			do: func(e *expectations) []any {
				t := keyOf("SandboxTemplate", "ns", "t")
				e.report(t, "refused")
				out := []any{e.reportedOn(t)}
				e.report(t, "")
				return append(out, e.reportedOn(t), len(e.records))
			},
			want: []any{"refused", "", 0},
		},
		"since the first pass": {
			reason: "the first pass sets since when this process reconciles; later passes do not move it",
			do: func(e *expectations) []any {
				return []any{e.started(at(time.Second)), e.started(at(time.Hour))}
			},
			want: []any{at(time.Second), at(time.Second)},
		},
		"forgetting an object": {
			reason: "an object gone takes its children's creates, its status writes and its memory with it",
			do: func(e *expectations) []any {
				e.created(pod, sb, "sb-uid", at(0))
				e.wroteOn(statusKey(sb), objectKey{}, "", "5")
				e.firstReady(sb, "sb-uid")
				e.forget(sb)
				return []any{e.createdAt(pod).IsZero(), e.stale(statusKey(sb), "5"), len(e.records)}
			},
			want: []any{true, false, 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.do(newExpectations(newPolicy(0)))
			for i := range got {
				if s, ok := got[i].([]string); ok {
					slices.Sort(s)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestExpectationsPrune: creates and deletes the cache never shows do not pile up.
func TestExpectationsPrune(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newExpectations(newPolicy(0))
	sb := keyOf("Sandbox", "ns", "sb")
	for i := range 5000 {
		e.created(keyOf("Pod", "ns", fmt.Sprint(i)), sb, types.UID("u"), t0.Add(time.Duration(i)*time.Second))
	}
	// Every 1,024 records made, creates older than the window go: at most a window's worth plus
	// 1,024 remain.
	if n := len(e.records); n > int(expectationWindow/time.Second)+1024 {
		t.Errorf("%d records kept", n)
	}
	if n := len(e.owned[sb]); n != len(e.records) {
		t.Errorf("%d records indexed by their owner, %d kept", n, len(e.records))
	}
}
