package controller

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// countingSink counts the key-value pairs attached to it.
type countingSink struct {
	logr.LogSink
	attached *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.attached += len(kv) / 2
	return countingSink{LogSink: c.LogSink.WithValues(kv...), attached: c.attached}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: c.LogSink.WithName(name), attached: c.attached}
}

// TestLazyLogs: a lazy logger writes what the logger it wraps writes, and attaches its pairs to
// that logger only when a message is written.
func TestLazyLogs(t *testing.T) {
	req := &reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "box"}}
	cases := map[string]struct {
		log          func(logr.Logger)
		wantAttached int // pairs attached to the wrapped sink by the lazy logger
	}{
		"nothing logged": {log: func(logr.Logger) {}},
		"not enabled":    {log: func(l logr.Logger) { l.V(1).Info("detail", "k", "v") }},
		"info":           {log: func(l logr.Logger) { l.Info("applied", "pod", "box") }, wantAttached: 6},
		"error":          {log: func(l logr.Logger) { l.Error(errors.New("boom"), "Reconciler error") }, wantAttached: 6},
		"more pairs and a name": {log: func(l logr.Logger) {
			l.WithName("sub").WithValues("reconcileID", "r1").Info("x")
		}, wantAttached: 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var eager, lazyOut []string
			newBase := func(out *[]string) logr.Logger {
				return funcr.New(func(prefix, args string) { *out = append(*out, prefix+" "+args) }, funcr.Options{})
			}
			// What controller-runtime's own constructor attaches, eagerly.
			e := newBase(&eager).WithValues("controller", "sandbox", "controllerGroup", "agents.x-k8s.io", "controllerKind", "Sandbox").
				WithValues("Sandbox", klog.KRef("team-a", "box"), "namespace", "team-a", "name", "box")
			tc.log(e)

			attached := 0
			base := newBase(&lazyOut)
			base = base.WithSink(countingSink{LogSink: base.GetSink(), attached: &attached})
			tc.log(reconcileLogs(base, "sandbox", "agents.x-k8s.io", "Sandbox")(req))

			if diff := cmp.Diff(eager, lazyOut); diff != "" {
				t.Errorf("lines (-eager +lazy):\n%s", diff)
			}
			if attached != tc.wantAttached {
				t.Errorf("%d pairs attached to the wrapped logger, want %d", attached, tc.wantAttached)
			}
		})
	}
}
