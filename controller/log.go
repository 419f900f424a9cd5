package controller

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// reconcileLogs is the log constructor of a controller: its name and kind, and per request the
// object's key, as controller-runtime's own constructor gives, but attached lazily. zap encodes
// key-value pairs the moment they are attached, so the default constructor (and the reconcile ID
// controller-runtime adds) encoded four pairs into a new buffer on every pass, logged or not:
// 7% of the controller's allocations at 1,000 Sandboxes. Here they are encoded only when
// something is logged.
func reconcileLogs(base logr.Logger, name, group, kind string) func(*reconcile.Request) logr.Logger {
	log := lazy(base).WithValues("controller", name, "controllerGroup", group, "controllerKind", kind)
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}

// lazy is l with key-value pairs kept aside until a message is logged.
func lazy(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		// The sink is called from lazySink's methods, one frame further from the caller.
		sink = cd.WithCallDepth(1)
	}
	return l.WithSink(lazySink{sink: sink})
}

type lazySink struct {
	sink logr.LogSink
	kv   []any
}

func (s lazySink) Init(info logr.RuntimeInfo) { s.sink.Init(info) }

func (s lazySink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s lazySink) Info(level int, msg string, kv ...any) {
	s.attached().Info(level, msg, kv...)
}

func (s lazySink) Error(err error, msg string, kv ...any) {
	s.attached().Error(err, msg, kv...)
}

func (s lazySink) WithValues(kv ...any) logr.LogSink {
	return lazySink{sink: s.sink, kv: append(s.kv[:len(s.kv):len(s.kv)], kv...)}
}

func (s lazySink) WithName(name string) logr.LogSink {
	return lazySink{sink: s.sink.WithName(name), kv: s.kv}
}

func (s lazySink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return lazySink{sink: cd.WithCallDepth(depth), kv: s.kv}
	}
	return s
}

// attached is the underlying sink with the pairs kept aside.
func (s lazySink) attached() logr.LogSink {
	if len(s.kv) == 0 {
		return s.sink
	}
	return s.sink.WithValues(s.kv...)
}
