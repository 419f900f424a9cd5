package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// TestEchoWaits: which events bring a claim or a Sandbox a pass, one sequence of pass starts,
// status writes, deferred events and echoes at a time. Each case returns what it asked, in order.
func TestEchoWaits(t *testing.T) {
	sb := keyOf("Sandbox", "ns", "a")
	other := keyOf("Sandbox", "ns", "b")
	cases := map[string]struct {
		reason string
		do     func(w *echoWaits) []bool
		want   []bool
	}{
		"a status write's echo let go once": {
			reason: "the update from the version the pass read to the one its write made brings no pass, once",
			do: func(w *echoWaits) []bool {
				w.await(sb, "5", "6")
				return []bool{w.echoed(sb, "5", "6"), w.echoed(sb, "5", "6")}
			},
			want: []bool{true, false},
		},
		"an update that is not the write's": {
			reason: "an update from another version (someone's change before ours) brings its pass and ends the wait: the echo after it brings one too",
			do: func(w *echoWaits) []bool {
				w.await(sb, "5", "6")
				return []bool{w.echoed(other, "5", "6"), w.echoed(sb, "5", "7"), w.echoed(sb, "5", "6")}
			},
			want: []bool{false, false, false},
		},
		"a pass that begins forgets the echo": {
			reason: "a pass reads the cache after everything deferred; if it began before the echo, the echo brings a pass again",
			do: func(w *echoWaits) []bool {
				w.await(sb, "5", "6")
				w.passStarts(other)
				kept := w.echoed(sb, "5", "6")
				w.await(sb, "6", "7")
				w.passStarts(sb)
				return []bool{kept, w.passEnds(sb), w.echoed(sb, "6", "7")}
			},
			want: []bool{true, false, false},
		},
		"an event during a pass that awaits no echo": {
			reason: "it is deferred to the pass, which is requeued when it ends",
			do: func(w *echoWaits) []bool {
				w.passStarts(sb)
				return []bool{w.deferred(sb), w.deferred(other), w.passEnds(sb), w.deferred(sb)}
			},
			want: []bool{true, false, true, false},
		},
		"an event during a pass that writes its status": {
			reason: "the echo owes it a pass: the pass is not requeued, and the echo is not let go",
			do: func(w *echoWaits) []bool {
				w.passStarts(sb)
				deferred := w.deferred(sb)
				w.await(sb, "5", "6")
				return []bool{deferred, w.passEnds(sb), w.echoed(sb, "5", "6")}
			},
			want: []bool{true, false, false},
		},
		"an event while the echo is awaited": {
			reason: "it is deferred to the echo, which then brings a pass; the next event brings its own",
			do: func(w *echoWaits) []bool {
				w.passStarts(sb)
				w.await(sb, "5", "6")
				ended := w.passEnds(sb)
				return []bool{ended, w.deferred(sb), w.echoed(sb, "5", "6"), w.deferred(sb)}
			},
			want: []bool{false, true, false, false},
		},
		"the echo came before the write was recorded": {
			reason: "the echo brought its pass; that pass forgets the record, so no later event waits on an echo that already passed",
			do: func(w *echoWaits) []bool {
				w.passStarts(sb)
				early := w.echoed(sb, "5", "6") // the write's echo, before await
				w.await(sb, "5", "6")
				w.passEnds(sb)
				w.passStarts(sb) // the pass the echo brought
				w.passEnds(sb)
				return []bool{early, w.deferred(sb)}
			},
			want: []bool{false, false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.do(newEchoWaits())); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// counter is a counter of the controller's by kind, as its /metrics serves it.
func counter(t *testing.T, name, kind string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestEchoFilter: a kind's own watch drops exactly the update awaitEcho recorded, once, and
// counts it; every other event of the object, or of another, brings its pass.
func TestEchoFilter(t *testing.T) {
	sb := func(name, rv string) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	update := func(name, from, to string) event.UpdateEvent {
		return event.UpdateEvent{ObjectOld: sb(name, from), ObjectNew: sb(name, to)}
	}
	x := &executor{echo: newEchoWaits()}
	a := keyOf(agentsv1beta1.SandboxKind, "ns", "a")
	filter := x.echoes(agentsv1beta1.SandboxKind)
	before := counter(t, "sandbox_gitops_status_echoes_let_go_total", agentsv1beta1.SandboxKind)
	x.echo.await(a, "5", "6")
	got := []bool{
		filter.Update(update("b", "5", "6")), // another Sandbox
		filter.Create(event.CreateEvent{Object: sb("a", "6")}),
		filter.Update(update("a", "5", "6")), // the echo
	}
	x.echo.await(a, "6", "7")
	got = append(got,
		filter.Update(update("a", "6", "8")), // someone's change hides in it
		filter.Update(update("a", "6", "7")), // the wait ended with the update before
	)
	if diff := cmp.Diff([]bool{true, true, false, true, true}, got); diff != "" {
		t.Errorf("events that bring a pass (-want +got):\n%s", diff)
	}
	if n := counter(t, "sandbox_gitops_status_echoes_let_go_total", agentsv1beta1.SandboxKind) - before; n != 1 {
		t.Errorf("echoes let go counted %v, want 1", n)
	}
}

// TestDeferToPass: a child's event for a Sandbox whose pass is under way brings no request, and
// is counted; one for another Sandbox, or after the pass, does.
func TestDeferToPass(t *testing.T) {
	x := &executor{echo: newEchoWaits()}
	toSandbox := x.deferToPass(agentsv1beta1.SandboxKind, sandboxOfChild)
	pod := func(name string) client.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind, Name: name, Controller: new(true)}}}}
	}
	before := counter(t, "sandbox_gitops_events_deferred_total", agentsv1beta1.SandboxKind)
	a := keyOf(agentsv1beta1.SandboxKind, "ns", "a")
	x.echo.passStarts(a)
	during := [][]reconcile.Request{toSandbox(context.Background(), pod("a")), toSandbox(context.Background(), pod("b"))}
	requeue := x.echo.passEnds(a)
	after := toSandbox(context.Background(), pod("a"))
	want := [][]reconcile.Request{nil, request("ns", "b"), request("ns", "a")}
	if diff := cmp.Diff(want, append(during, after), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("requests during the pass, then after it (-want +got):\n%s", diff)
	}
	if !requeue {
		t.Error("the pass an event was deferred to was not requeued")
	}
	if n := counter(t, "sandbox_gitops_events_deferred_total", agentsv1beta1.SandboxKind) - before; n != 1 {
		t.Errorf("events deferred counted %v, want 1", n)
	}
}
