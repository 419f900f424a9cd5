package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// eventSink records events only when something happened: one Normal event per pass that wrote,
// listing what it wrote (`Created Pod "x"; Created Service "x"`), and a Warning when an error
// first shows up in a status. Every event is a write to the API server, so a pass that changes
// nothing records nothing, and one pass costs at most one event.
type eventSink struct {
	recorder events.EventRecorder
}

// newEventSink wraps an events.k8s.io recorder (manager.GetEventRecorder).
func newEventSink(r events.EventRecorder) *eventSink { return &eventSink{recorder: r} }

func (e *eventSink) applied(obj runtime.Object, done []done) {
	if e == nil || e.recorder == nil || len(done) == 0 {
		return
	}
	parts := make([]string, len(done))
	for i, d := range done {
		parts[i] = fmt.Sprintf("%s %s %q", d.outcome, d.step.Kind, d.step.Name)
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeNormal, string(done[0].outcome), "Reconcile", "%s", strings.Join(parts, "; "))
}

func (e *eventSink) warning(obj runtime.Object, reason, message string) {
	if e == nil || e.recorder == nil {
		return
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", message)
}

func (e *eventSink) normal(obj runtime.Object, reason, message string) {
	if e == nil || e.recorder == nil {
		return
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Reconcile", "%s", message)
}
