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
}

// newEventSink wraps an events.k8s.io recorder (manager.GetEventRecorder).
func newEventSink(r events.EventRecorder) *eventSink { return &eventSink{recorder: r} }

// record records a plan's events on obj.
func (e *eventSink) record(obj runtime.Object, events ...render.Event) {
	if e == nil || e.recorder == nil {
		return
	}
	for _, ev := range events {
		e.recorder.Eventf(obj, nil, ev.Type, ev.Reason, "Reconcile", "%s", ev.Message)
	}
}
