package controller

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// eventSink records the events plans decide (render.Plan): one Normal event per pass that wrote,
// listing what it wrote (`Created Pod "x"; Created Service "x"`), and a Warning when an error
// first shows up in a status. Every event is a write to the API server, so a pass that changes
// nothing records nothing.
type eventSink struct {
	recorder events.EventRecorder
	// gate holds events while writes somebody waits on are in flight (nil: none held).
	gate *gate
}

// newEventSink wraps an events.k8s.io recorder (manager.GetEventRecorder).
func newEventSink(r events.EventRecorder, g *gate) *eventSink {
	return &eventSink{recorder: r, gate: g}
}

// record records a plan's events on obj, or leaves them to the gate while it is closed.
func (e *eventSink) record(obj runtime.Object, events ...render.Event) {
	if e == nil || e.recorder == nil {
		return
	}
	for _, ev := range events {
		if !e.gate.event(obj, ev) {
			e.send(obj, ev)
		}
	}
}

// send records one event now.
func (e *eventSink) send(obj runtime.Object, ev render.Event) {
	e.recorder.Eventf(obj, nil, ev.Type, ev.Reason, "Reconcile", "%s", ev.Message)
}
