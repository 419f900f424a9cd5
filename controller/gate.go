package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// gate keeps the writes nobody waits on (render.Plan.Background: a pool's refill, the re-sync of
// a Sandbox that is Ready and stays Ready, a template's NetworkPolicy, events) behind the writes
// somebody waits on (a claim's adoption and status, a Sandbox on its way to Ready). The API
// server is what every write shares: on a busy one, a refill of hundreds of members sent during
// a burst of claims is what the claims wait behind. While a foreground pass is writing, or has
// written within quiet, a background pass is held: it sends nothing, and is woken when the gate
// opens, or once it has been held maxHold. A patient pass (a pool's refill while the pool keeps
// its reserve of Ready members, which is what keeps it from starving) is held as long as the gate
// stays closed: a stream of claims longer than maxHold would otherwise meet the whole refill.
// Events wait the same way as the passes that are not patient.
type gate struct {
	// p decides; the gate keeps the state it decides on.
	p   policy
	now func() time.Time

	mu             sync.Mutex
	inFlight       int
	lastForeground time.Time
	// held are the background passes held, by reconciler and request; a released one (zero
	// since) is let through on its next pass even if the gate has closed again meanwhile, so
	// that a gate that opens and closes often does not wake and hold the same passes over and
	// over.
	held map[string]map[reconcile.Request]heldPass
	wake map[string]chan event.TypedGenericEvent[reconcile.Request]
	// events are the events recorded while the gate was closed, in order; send records one.
	events []heldEvent
	send   func(runtime.Object, render.Event)
}

type heldEvent struct {
	obj runtime.Object
	ev  render.Event
	at  time.Time
}

func newGate(p policy, now func() time.Time) *gate {
	if now == nil {
		now = time.Now
	}
	return &gate{p: p, now: now,
		held: map[string]map[reconcile.Request]heldPass{}, wake: map[string]chan event.TypedGenericEvent[reconcile.Request]{}}
}

// source is the watch that wakes reconciler name's held requests: the reconciler adds it to its
// controller.
func (g *gate) source(name string) source.TypedSource[reconcile.Request] {
	ch := make(chan event.TypedGenericEvent[reconcile.Request], 1024)
	g.mu.Lock()
	g.wake[name] = ch
	g.mu.Unlock()
	return source.TypedChannel[reconcile.Request, reconcile.Request](ch, handler.TypedFuncs[reconcile.Request, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(e.Object)
		},
	})
}

// foreground marks a foreground pass's writes in flight; done marks them finished.
func (g *gate) foreground() (done func()) {
	if g == nil || !g.p.gating() {
		return func() {}
	}
	g.mu.Lock()
	g.inFlight++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.inFlight--
		g.lastForeground = g.now()
		g.mu.Unlock()
	}
}

// isOpen reports whether background work may go now (a gate that holds nothing is always open).
func (g *gate) isOpen() bool {
	if g == nil || !g.p.gating() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open(g.now())
}

// open reports whether background work may go now. The caller holds the lock.
func (g *gate) open(now time.Time) bool {
	return g.p.open(g.inFlight, g.lastForeground, now)
}

// hold says whether reconciler name's background pass of req waits: the gate is closed, and the
// pass has not been woken, nor (unless patient) held maxHold yet. A pass let through is no
// longer held.
func (g *gate) hold(name string, req reconcile.Request, patient bool) bool {
	if g == nil || !g.p.gating() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	h, waiting := g.held[name][req]
	if g.p.letThrough(h, waiting, g.open(now), patient, now) {
		delete(g.held[name], req)
		return false
	}
	if !waiting {
		if g.held[name] == nil {
			g.held[name] = map[reconcile.Request]heldPass{}
		}
		g.held[name][req] = heldPass{since: now, patient: patient}
	}
	return true
}

// event says whether an event waits: the gate is closed (it is then kept, in order).
func (g *gate) event(obj runtime.Object, ev render.Event) bool {
	if g == nil || !g.p.gating() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.p.holdEvent(len(g.events), g.open(now)) {
		return false
	}
	g.events = append(g.events, heldEvent{obj, ev, now})
	return true
}

// release wakes the held passes and returns the held events that may go now, eventsPerTick at
// most, oldest first: any when the gate is open, else those held maxHold (patient passes wait
// for it to open).
func (g *gate) release() []heldEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	open := g.open(now)
	for name, reqs := range g.held {
		for req, h := range reqs {
			if !g.p.wake(h, open, now) {
				continue
			}
			select {
			case g.wake[name] <- event.TypedGenericEvent[reconcile.Request]{Object: req}:
				reqs[req] = heldPass{}
			default: // the queue is behind; the next tick, or the pass's own requeue, brings it
			}
		}
	}
	heldAt := make([]time.Time, 0, min(len(g.events), eventsPerTick))
	for _, e := range g.events[:min(len(g.events), eventsPerTick)] {
		heldAt = append(heldAt, e.at)
	}
	n := g.p.releaseEvents(heldAt, open, now)
	out := g.events[:n:n]
	g.events = g.events[n:]
	return out
}

// Start runs the gate until ctx ends: every quiet/2 it wakes what may go, and records the
// events that may. It runs in every replica (NeedLeaderElection).
func (g *gate) Start(ctx context.Context) error {
	if !g.p.gating() {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(g.p.tick())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			for _, e := range g.release() {
				g.send(e.obj, e.ev)
			}
		}
	}
}

// NeedLeaderElection: a replica that does not lead writes nothing, and holds nothing.
func (g *gate) NeedLeaderElection() bool { return false }
