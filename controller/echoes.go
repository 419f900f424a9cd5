package controller

import "sync"

// echoWaits are what decides which watch events bring a claim or a Sandbox a pass beyond what
// the informers' own deduplication does:
//   - the echo of a status write that needs no pass (awaitEcho): the object's own update from
//     the version its pass read to the version the write made;
//   - the events of other objects (a claim's Sandbox, a Sandbox's children) that arrive while
//     the object's pass runs or its echo is awaited: the pass ends in a requeue, or the echo
//     brings a pass, that reads them anyway (deferred).
//
// Without the second, a warm claim's adoption costs a pass more: its Sandbox's event arrives
// while the claim's pass writes the claim's status, so the next pass begins on the claim as it
// was before that write, does nothing, and the status's echo then brings another.
//
// Every event deferred is followed by a pass that begins after it, and so reads the cache with
// the event in it: passEnds requeues the object when nothing else comes, an awaited echo that
// took an event brings its pass (owed), and any pass that begins forgets the echo awaited.
type echoWaits struct {
	mu      sync.Mutex
	awaited map[objectKey]echo
	// running are the objects with a pass under way; true once an event was deferred to it.
	running map[objectKey]bool
}

// echo is a status write by its object's own pass, from the resourceVersion the pass read to the
// one the write made. owed: an event was deferred to it, so it brings a pass after all.
type echo struct {
	from, to string
	owed     bool
}

func newEchoWaits() *echoWaits {
	return &echoWaits{awaited: map[objectKey]echo{}, running: map[objectKey]bool{}}
}

// passStarts marks obj's pass as under way, before it reads anything, and forgets the echo
// awaited of an earlier pass: this pass reads the cache after every event deferred to it. If the
// echo has not come yet, it brings a pass of its own again (this one may begin on the version
// before the write, and leave to the echo what it cannot decide there).
func (w *echoWaits) passStarts(obj objectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[obj] = false
	delete(w.awaited, obj)
}

// passEnds ends obj's pass and reports whether it must be requeued: an event was deferred to it
// and no echo of its own awaited will bring the next pass (the echo then owes one).
func (w *echoWaits) passEnds(obj objectKey) (requeue bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	deferred := w.running[obj]
	delete(w.running, obj)
	return deferred && !w.owe(obj)
}

// deferred reports whether an event of another object that maps to obj is left to obj's pass
// under way or to its awaited echo, and records that it was.
func (w *echoWaits) deferred(obj objectKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[obj]; ok {
		w.running[obj] = true
		return true
	}
	return w.owe(obj)
}

// owe makes obj's awaited echo, if there is one, bring a pass after all. w.mu is held.
func (w *echoWaits) owe(obj objectKey) bool {
	e, ok := w.awaited[obj]
	if ok {
		e.owed = true
		w.awaited[obj] = e
	}
	return ok
}

// await records that obj's pass wrote its status, taking it from resourceVersion from to to,
// and that a pass on what that write leaves would do nothing (render.EchoNeedsNoPass): the
// write's watch event (its echo) then needs no pass of its own, unless an event is deferred to
// it meanwhile.
func (w *echoWaits) await(obj objectKey, from, to string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.awaited[obj] = echo{from: from, to: to}
}

// echoed reports whether an update of obj from resourceVersion from to to is the echo await
// recorded and may be let go. The first update of obj ends the wait, whatever it is. Both
// versions must match: the cache then held exactly what the writing pass read, and shows now
// exactly what it wrote, so no change of anyone else's hides in the event. An echo that took a
// deferred event is not let go.
func (w *echoWaits) echoed(obj objectKey, from, to string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.awaited[obj]
	if !ok {
		return false
	}
	delete(w.awaited, obj)
	return e.from == from && e.to == to && !e.owed
}
