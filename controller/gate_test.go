package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestGate: background passes and events wait while a foreground pass writes and for quiet
// after it, at most maxHold (a patient pass: until the gate opens); a held pass is woken once
// when the gate opens and let through then, even if the gate has closed again.
func TestGate(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	ev := render.Event{Type: "Normal", Reason: "Created", Message: "x"}

	g := newGate(newPolicy(10*time.Second), clock)
	ch := make(chan event.TypedGenericEvent[reconcile.Request], 8)
	g.wake["Sandbox"] = ch
	woken := func() (out []string) {
		for {
			select {
			case e := <-ch:
				out = append(out, e.Object.Name)
			default:
				slices.Sort(out)
				return out
			}
		}
	}

	if g.hold("Sandbox", req("idle"), false) {
		t.Fatal("a background pass was held with nothing in flight")
	}
	done := g.foreground()
	got := []any{g.hold("Sandbox", req("a"), false), g.event(nil, ev)}
	now = now.Add(time.Second)
	done() // the foreground write ends; the gate stays closed for quiet
	got = append(got, g.hold("Sandbox", req("b"), false), len(g.release()), woken())
	now = now.Add(defaultQuiet)
	got = append(got, len(g.release()), woken())
	done = g.foreground() // closed again before the woken passes run
	got = append(got, g.hold("Sandbox", req("a"), false), g.hold("Sandbox", req("b"), false), g.hold("Sandbox", req("c"), false))
	now = now.Add(10 * time.Second) // c has been held maxHold: woken though the gate is closed
	got = append(got, woken(), len(g.release()), woken(), g.hold("Sandbox", req("c"), false))
	done()
	want := []any{true, true, true, 0, []string(nil), 1, []string{"a", "b"}, false, false, true, []string(nil), 0, []string{"c"}, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A patient pass waits as long as the gate stays closed, past maxHold; it goes when it opens.
	done = g.foreground()
	patient := []any{g.hold("SandboxWarmPool", req("pool"), true)}
	now = now.Add(time.Minute)
	patient = append(patient, len(g.release()), woken(), g.hold("SandboxWarmPool", req("pool"), true))
	done()
	now = now.Add(defaultQuiet)
	poolCh := make(chan event.TypedGenericEvent[reconcile.Request], 1)
	g.wake["SandboxWarmPool"] = poolCh
	g.release()
	patient = append(patient, len(poolCh), g.hold("SandboxWarmPool", req("pool"), true))
	if diff := cmp.Diff([]any{true, 0, []string(nil), true, 1, false}, patient); diff != "" {
		t.Errorf("patient (-want +got):\n%s", diff)
	}

	// Held events drain eventsPerTick a tick once the gate opens: each is a POST of its own.
	done = g.foreground()
	for range eventsPerTick + 5 {
		g.event(nil, ev)
	}
	done()
	now = now.Add(defaultQuiet)
	if got := []int{len(g.release()), len(g.release()), len(g.release())}; !slices.Equal(got, []int{eventsPerTick, 5, 0}) {
		t.Errorf("events released tick by tick: %v, want [%d 5 0]", got, eventsPerTick)
	}

	done = g.foreground()
	if g.isOpen() {
		t.Error("the gate is open while a foreground pass writes")
	}
	done()

	off := newGate(newPolicy(-1), clock)
	off.foreground()()
	if !off.isOpen() {
		t.Error("a gate with no hold is closed")
	}
	if off.hold("Sandbox", req("a"), false) || off.event(nil, ev) {
		t.Error("a gate with no hold held something")
	}
}
