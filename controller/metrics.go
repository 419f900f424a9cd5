package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// sandboxReadySeconds is what a user of a Sandbox waits for: from its creation to the first
// time this controller reports it Ready. controller-runtime's own metrics (reconcile counts and
// durations, work queue depth) come from the same registry.
var sandboxReadySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "sandbox_gitops_sandbox_ready_seconds",
	Help:    "Time from a Sandbox's creation to the first status that reports it Ready.",
	Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
})

// claimReadySeconds is the latency users of claims feel, from the claim's creation to the first
// status that reports it Ready, by how its Sandbox was launched (warm adoption or cold start).
var claimReadySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "sandbox_gitops_claim_ready_seconds",
	Help:    "Time from a SandboxClaim's creation to the first status that reports it Ready, by launch type (warm, cold).",
	Buckets: []float64{0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60},
}, []string{"launch_type"})

// echoesLetGo counts the watch events of the controller's own status writes that brought no pass
// (see echoWaits.await), by kind: the passes saved.
var echoesLetGo = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sandbox_gitops_status_echoes_let_go_total",
	Help: "Watch events of the controller's own status writes that needed no pass, by kind.",
}, []string{"kind"})

// eventsDeferred counts the events of other objects (a claim's Sandbox, a Sandbox's children)
// left to the pass under way or the awaited echo of the object they map to (see
// echoWaits.deferred), by that object's kind.
var eventsDeferred = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sandbox_gitops_events_deferred_total",
	Help: "Watch events of other objects left to the pass under way, or to the awaited status echo, of the claim or Sandbox they map to, by kind.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(sandboxReadySeconds, claimReadySeconds, echoesLetGo, eventsDeferred)
}

func observeClaimReady(launch string, d time.Duration) {
	if launch == "" {
		launch = "unknown"
	}
	claimReadySeconds.WithLabelValues(launch).Observe(max(d, 0).Seconds())
}

func observeReady(d time.Duration) {
	if d < 0 {
		d = 0
	}
	sandboxReadySeconds.Observe(d.Seconds())
}
