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
	quiet, maxHold time.Duration
	now            func() time.Time

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

// heldPass is a held pass: since when, and whether it waits for the gate to open however long.
type heldPass struct {
	since   time.Time
	patient bool
}

type heldEvent struct {
	obj runtime.Object
	ev  render.Event
	at  time.Time
}

// Default gate timings: a foreground pass that wrote keeps the gate closed for defaultQuiet; a
// background pass is never held longer than DefaultBackgroundHold.
const (
	defaultQuiet = 250 * time.Millisecond
	// DefaultBackgroundHold is --background-hold's default: longer than a burst of claims
	// (upstream's scale test sends one of 10 s), short enough that a pool drained by a steady
	// stream is refilled in time.
	DefaultBackgroundHold = 10 * time.Second
	// maxHeldEvents bounds the events kept while the gate is closed; past it they are recorded
	// at once.
	maxHeldEvents = 100000
	// eventsPerTick is how many held events go each tick (quiet/2), 200 a second: each is a POST
	// of its own, and a thousand sent at once when the gate opened met the API server's 429s
	// (209 refused, then retried, converging 1,000 Sandboxes on envtest).
	eventsPerTick = 25
)

func newGate(maxHold time.Duration, now func() time.Time) *gate {
	if now == nil {
		now = time.Now
	}
	return &gate{quiet: defaultQuiet, maxHold: maxHold, now: now,
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
	if g == nil || g.maxHold <= 0 {
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
	if g == nil || g.maxHold <= 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open(g.now())
}

// open reports whether background work may go now. The caller holds the lock.
func (g *gate) open(now time.Time) bool {
	return g.inFlight == 0 && now.Sub(g.lastForeground) >= g.quiet
}

// hold says whether reconciler name's background pass of req waits: the gate is closed, and the
// pass has not been woken, nor (unless patient) held maxHold yet. A pass let through is no
// longer held.
func (g *gate) hold(name string, req reconcile.Request, patient bool) bool {
	if g == nil || g.maxHold <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	h, waiting := g.held[name][req]
	if g.open(now) || (waiting && (h.since.IsZero() || (!patient && now.Sub(h.since) >= g.maxHold))) {
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
	if g == nil || g.maxHold <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.open(now) || len(g.events) >= maxHeldEvents {
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
			if h.since.IsZero() || (!open && (h.patient || now.Sub(h.since) < g.maxHold)) {
				continue
			}
			select {
			case g.wake[name] <- event.TypedGenericEvent[reconcile.Request]{Object: req}:
				reqs[req] = heldPass{}
			default: // the queue is behind; the next tick, or the pass's own requeue, brings it
			}
		}
	}
	n := 0
	for n < len(g.events) && n < eventsPerTick && (open || now.Sub(g.events[n].at) >= g.maxHold) {
		n++
	}
	out := g.events[:n:n]
	g.events = g.events[n:]
	return out
}

// Start runs the gate until ctx ends: every quiet/2 it wakes what may go, and records the
// events that may. It runs in every replica (NeedLeaderElection).
func (g *gate) Start(ctx context.Context) error {
	if g.maxHold <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(g.quiet / 2)
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
