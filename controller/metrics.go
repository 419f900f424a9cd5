package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
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

func init() {
	metrics.Registry.MustRegister(sandboxReadySeconds, claimReadySeconds)
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

// firstReady remembers, per object name, the UID this process has seen Ready, so that the
// latency histograms count an object's first Ready only: a Sandbox Ready again after a resume or
// a lost Pod has not been waited for since its creation, and its age (days, perhaps) would
// swamp a histogram of seconds. An object already Ready when this process starts is remembered
// on its first pass; one that is not Ready then (suspended, say) counts once when it is.
type firstReady struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

// first records obj's UID as Ready and reports whether it was not already.
func (f *firstReady) first(key types.NamespacedName, uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uids == nil {
		f.uids = map[types.NamespacedName]types.UID{}
	}
	if f.uids[key] == uid {
		return false
	}
	f.uids[key] = uid
	return true
}

// forget drops a deleted object, so the map holds no more than the objects that exist.
func (f *firstReady) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, key)
}
