package controller

import "time"

// policy is the controller's scheduling policy, the one kind of decision the controller keeps:
// when a pass's writes may go, when a pass comes back, and how long the cache may lag behind this
// process's writes. What an object looks like, which object a pass takes and what a refused write
// means are render's. The policy's decisions are pure functions of the state the gate and the
// expectations keep and of a time passed in (policy_test.go tests them without an API server);
// gate.go, expectations.go and the executor hold the state and apply them. Every constant is
// here, with the measurement that chose it.
type policy struct {
	// quiet is how long a foreground pass that wrote keeps the gate closed after its last write.
	quiet time.Duration
	// maxHold is the longest a background pass that is not patient, or an event, is held; zero
	// or less turns the gate off (--background-hold 0 sends everything at once).
	maxHold time.Duration
}

const (
	// defaultQuiet: a claim's writes come in a few round trips tens of milliseconds apart; 250
	// ms bridges the gaps within one claim and between claims of a burst, so a refill does not
	// slip in between them, and lets it go a quarter second after the burst.
	defaultQuiet = 250 * time.Millisecond
	// DefaultBackgroundHold is --background-hold's default: longer than a burst of claims
	// (upstream's scale test sends one of 10 s), short enough that a pool drained by a steady
	// stream is refilled in time.
	DefaultBackgroundHold = 10 * time.Second
	// maxHeldEvents bounds the events kept while the gate is closed; past it they are recorded
	// at once (100,000 events are about 30 MB, far above the 20,000 a full render may create).
	maxHeldEvents = 100000
	// eventsPerTick is how many held events go each tick (quiet/2), 200 a second: each is a POST
	// of its own, and a thousand sent at once when the gate opened met the API server's 429s
	// (209 refused, then retried, converging 1,000 Sandboxes on envtest).
	eventsPerTick = 25
	// expectationWindow is how long a create or delete the cache has not shown is still
	// expected: its watch event normally comes within milliseconds; an object deleted before
	// the cache saw it never comes.
	expectationWindow = time.Minute
	// cacheLag is how long a child just created may take to reach the cache before a pass that
	// plans to create it again reads it from the API server instead of waiting for its event (it
	// may have been deleted before the cache saw it). Events arrived within 1 s at 1,000
	// Sandboxes on envtest; 5 s leaves room for a loaded API server.
	cacheLag = 5 * time.Second
	// awaitCacheRetry is when a pass that awaits the cache comes back should no event bring it:
	// at 1,000 Sandboxes created together, 874 passes would otherwise have read a Service whose
	// event came after its Pod's; the event nearly always comes first.
	awaitCacheRetry = time.Second
	// deferredRetry is how soon a pass that events were deferred to (executor.deferToPass) runs
	// again when no echo of its own brings the next: at once, as the events would have brought
	// it, but through the queue's delay, since a requeue without one goes through its rate
	// limiter (10 a second past a burst of 100).
	deferredRetry = time.Millisecond
	// maxReplans bounds the plans of one pass: each follows a conflict (a lost adoption race, an
	// object in the way of a create) read and planned with; past it the pass fails and is
	// retried. A burst of 50 claims on one pool needed at most 3 before claims were ranked.
	maxReplans = 16
)

// newPolicy is the policy with maxHold as --background-hold gives it (0: the default; less:
// off).
func newPolicy(maxHold time.Duration) policy {
	if maxHold == 0 {
		maxHold = DefaultBackgroundHold
	}
	return policy{quiet: defaultQuiet, maxHold: maxHold}
}

// gating reports whether background work is held at all.
func (p policy) gating() bool { return p.maxHold > 0 }

// open reports whether background work may go at now: no foreground write in flight, and none
// finished within quiet.
func (p policy) open(inFlight int, lastForeground, now time.Time) bool {
	return inFlight == 0 && now.Sub(lastForeground) >= p.quiet
}

// heldPass is a held pass: since when (zero once the gate has woken it), and whether it waits
// for the gate to open however long.
type heldPass struct {
	since   time.Time
	patient bool
}

// letThrough decides a background pass when it asks: through when the gate is open, when the
// gate woke it (a released pass goes on its next pass even if the gate has closed again, so
// that a gate that opens and closes often does not wake and hold the same pass over and over),
// or when it has been held maxHold and is not patient. waiting says whether it was held
// already (h is then its record).
func (p policy) letThrough(h heldPass, waiting, open, patient bool, now time.Time) bool {
	return open || waiting && (h.since.IsZero() || !patient && now.Sub(h.since) >= p.maxHold)
}

// wake reports whether the gate's tick wakes a held pass: once, when the gate is open or the
// pass has been held maxHold (a patient pass: only when the gate is open).
func (p policy) wake(h heldPass, open bool, now time.Time) bool {
	return !h.since.IsZero() && (open || !h.patient && now.Sub(h.since) >= p.maxHold)
}

// holdEvent reports whether an event recorded at now waits, with held events already waiting:
// the gate is closed and the bound is not reached.
func (p policy) holdEvent(held int, open bool) bool {
	return !open && held < maxHeldEvents
}

// releaseEvents is how many of the held events (held at the times given, oldest first) go at
// this tick: eventsPerTick at most, any when the gate is open, else those held maxHold.
func (p policy) releaseEvents(heldAt []time.Time, open bool, now time.Time) int {
	n := 0
	for n < len(heldAt) && n < eventsPerTick && (open || now.Sub(heldAt[n]) >= p.maxHold) {
		n++
	}
	return n
}

// heldRetry is when a held pass comes back should the gate not wake it: just past maxHold.
func (p policy) heldRetry() time.Duration { return p.maxHold + time.Second }

// tick is how often the gate looks at what it holds.
func (p policy) tick() time.Duration { return p.quiet / 2 }

// pendingCreate is what a pass does about a create it plans of an object this process created
// at created that the cache does not show.
type pendingCreate int

const (
	// createAnew: nothing of ours is pending (or it is older than expectationWindow): send it.
	createAnew pendingCreate = iota
	// awaitCache: created within cacheLag; its watch event brings the next pass.
	awaitCache
	// readFirst: created longer ago than cacheLag: read it from the API server and plan with
	// what is there, since it may have been deleted before the cache saw it.
	readFirst
)

// pending decides a planned create of an object this process created at created (zero: it did
// not, or the cache has shown it since).
func (p policy) pending(created, now time.Time) pendingCreate {
	switch {
	case created.IsZero() || now.Sub(created) > expectationWindow:
		return createAnew
	case now.Sub(created) <= cacheLag:
		return awaitCache
	}
	return readFirst
}

// expired reports whether a create or delete of ours made at t is no longer expected.
func (p policy) expired(t, now time.Time) bool {
	return !t.IsZero() && now.Sub(t) > expectationWindow
}
