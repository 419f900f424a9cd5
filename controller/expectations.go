package controller

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// objectKey names an object of a kind, or its status: the status and the rest of an object are
// written apart, on versions of their own.
type objectKey struct {
	kind, namespace, name string
	status                bool
}

func keyOf(kind, namespace, name string) objectKey {
	return objectKey{kind: kind, namespace: namespace, name: name}
}

func statusKey(k objectKey) objectKey { k.status = true; return k }

// expectations are what this process wrote, or said, that its cache may not show yet: the one
// memory of the controller, per object, so that a pass on a cache behind its writes neither
// repeats them nor decides against them. Every reconciler shares it; its entries go once the
// cache shows the write, the object is gone, or a window passes.
//
// It remembers, per object:
//   - a create or delete of ours the cache has not shown (a Sandbox's children; a pool's
//     members; a claim's Sandbox, created or adopted), and whose pass made it;
//   - the resourceVersion a write of ours started from (a status write; an adoption on the
//     member's version): while the cache still shows that version, the object as cached is
//     older than our write;
//   - a write in flight on a resourceVersion, so that two workers do not send two of which one
//     can only fail;
//   - upstream's annotations applied to it, and the refusal last reported on it;
//   - the UID it was first seen Ready with, so that latency metrics count a first Ready once.
//
// And, for the whole process, since when it has reconciled (the first pass): an object created
// after that can hold only what this process wrote.
type expectations struct {
	// mu is read-locked by the questions asked for every member of a pool on every claim pass
	// (stale, busy), which change nothing in the common case.
	mu      sync.RWMutex
	records map[objectKey]*record
	// owned indexes the creates and deletes by the object whose pass made them.
	owned map[objectKey]map[objectKey]struct{}
	// marked are the records with a write on a version or a write in flight: the few that decide
	// which of a pool's members a claim may be offered (current).
	marked map[objectKey]struct{}
	adds   int
	// since is when this process started reconciling (see started), set once.
	since atomic.Pointer[time.Time]
	// p says how long a create or delete the cache has not shown stays expected.
	p policy
}

type record struct {
	created, deleted time.Time // zero: none pending
	owner            objectKey
	ownerUID         types.UID
	// from is the resourceVersion a write of ours started from.
	from string
	// holder is the owner of a write in flight.
	holder types.UID
	// readyUID is the UID of the object this process first saw Ready.
	readyUID types.UID
	// annotated are upstream's annotations applied to the object of annotatedUID.
	annotated    map[string]string
	annotatedUID types.UID
	// reported is the refusal last reported in an event.
	reported string
}

func newExpectations(p policy) *expectations {
	return &expectations{p: p, records: map[objectKey]*record{}, owned: map[objectKey]map[objectKey]struct{}{}, marked: map[objectKey]struct{}{}}
}

// started returns since when this process reconciles, setting it on the first call: the
// reconcilers run only once this replica leads, so the first pass is after leadership began.
func (e *expectations) started(now time.Time) time.Time {
	if t := e.since.Load(); t != nil {
		return *t
	}
	e.since.CompareAndSwap(nil, &now)
	return *e.since.Load()
}

// get is the record of k, made if make is set (nil otherwise when there is none). The caller
// holds the lock.
func (e *expectations) get(k objectKey, make bool) *record {
	r := e.records[k]
	if r == nil && make {
		r = &record{}
		e.records[k] = r
		e.adds++
	}
	return r
}

// tidy drops k's record once it remembers nothing. The caller holds the lock.
func (e *expectations) tidy(k objectKey) {
	r := e.records[k]
	if r == nil || r.created != (time.Time{}) || r.deleted != (time.Time{}) || r.from != "" || r.holder != "" ||
		r.readyUID != "" || r.annotated != nil || r.reported != "" {
		return
	}
	delete(e.records, k)
	delete(e.marked, k)
	if o := e.owned[r.owner]; o != nil {
		delete(o, k)
		if len(o) == 0 {
			delete(e.owned, r.owner)
		}
	}
}

// mark keeps marked in step with r's writes on a version and in flight. The caller holds the
// lock.
func (e *expectations) mark(k objectKey, r *record) {
	if r != nil && (r.from != "" || r.holder != "") {
		e.marked[k] = struct{}{}
	} else {
		delete(e.marked, k)
	}
}

// created records a create of obj by owner's pass.
func (e *expectations) created(obj, owner objectKey, ownerUID types.UID, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	r.created, r.deleted, r.owner, r.ownerUID = now, time.Time{}, owner, ownerUID
	e.own(owner, obj)
	e.prune(now)
}

// deleted records a delete of obj by owner's pass.
func (e *expectations) deleted(obj, owner objectKey, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	r.deleted, r.created, r.owner = now, time.Time{}, owner
	e.own(owner, obj)
}

func (e *expectations) own(owner, obj objectKey) {
	if e.owned[owner] == nil {
		e.owned[owner] = map[objectKey]struct{}{}
	}
	e.owned[owner][obj] = struct{}{}
}

// prune drops, every 1,024 records made, the creates and deletes the cache never showed (their
// objects gone before it saw them). The caller holds the lock.
func (e *expectations) prune(now time.Time) {
	if e.adds < 1024 {
		return
	}
	e.adds = 0
	for k, r := range e.records {
		if e.p.expired(r.created, now) {
			r.created = time.Time{}
		}
		if e.p.expired(r.deleted, now) {
			r.deleted = time.Time{}
		}
		e.tidy(k)
	}
}

// seen settles obj as the cache shows it now: present or not. A create is met once it is
// present, a delete once it is gone.
func (e *expectations) seen(obj objectKey, present bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.records[obj]
	if r == nil {
		return
	}
	if present {
		r.created = time.Time{}
	} else {
		r.deleted = time.Time{}
	}
	e.tidy(obj)
}

// createdAt is when this process created obj, if the cache has not shown it yet (zero
// otherwise); policy.pending decides what a pass does about it.
func (e *expectations) createdAt(obj objectKey) time.Time {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.records[obj]; r != nil {
		return r.created
	}
	return time.Time{}
}

// pending settles owner's creates and deletes against what the cache shows (present) and returns
// those still open, by name, within the window of PoolWriteRecheck's expectations.
func (e *expectations) pending(owner objectKey, present func(objectKey) bool, now time.Time, window time.Duration) (creates, deletes []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.owned[owner] {
		r := e.records[k]
		if r != nil && !r.created.IsZero() && (present(k) || now.Sub(r.created) > window) {
			r.created = time.Time{}
		}
		if r != nil && !r.deleted.IsZero() && (!present(k) || now.Sub(r.deleted) > window) {
			r.deleted = time.Time{}
		}
		switch {
		case r != nil && !r.created.IsZero():
			creates = append(creates, k.name)
		case r != nil && !r.deleted.IsZero():
			deletes = append(deletes, k.name)
		default:
			delete(e.owned[owner], k)
			e.tidy(k)
		}
	}
	if len(e.owned[owner]) == 0 {
		delete(e.owned, owner)
	}
	return creates, deletes
}

// acquired is the object of kind that owner's pass (of that UID) created or wrote on a version,
// that the cache has not yet shown as owner's: a claim's Sandbox, cold or adopted.
func (e *expectations) acquired(owner objectKey, ownerUID types.UID, kind string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.owned[owner] {
		if r := e.records[k]; k.kind == kind && !k.status && r != nil && r.ownerUID == ownerUID && (!r.created.IsZero() || r.from != "") {
			return k.name, true
		}
	}
	return "", false
}

// release forgets what owner's passes made: the cache shows it now, or it is gone.
func (e *expectations) release(owner objectKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.owned[owner] {
		if r := e.records[k]; r != nil && r.owner == owner {
			r.created, r.deleted = time.Time{}, time.Time{}
			e.tidy(k)
		}
	}
	delete(e.owned, owner)
}

// wroteOn records a write of ours to obj that started from resourceVersion rv, by owner's pass
// (none for a status write, which is the object's own).
func (e *expectations) wroteOn(obj, owner objectKey, ownerUID types.UID, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	r.from = rv
	e.mark(obj, r)
	if owner != (objectKey{}) {
		r.owner, r.ownerUID = owner, ownerUID
		e.own(owner, obj)
	}
}

// stale reports whether the cache shows obj at the version a write of ours started from (it has
// not caught up with the write); once it shows another, the write is forgotten.
func (e *expectations) stale(obj objectKey, rv string) bool {
	e.mu.RLock()
	r := e.records[obj]
	if r == nil || r.from == "" || r.from == rv {
		defer e.mu.RUnlock()
		return r != nil && r.from != "" && r.from == rv
	}
	e.mu.RUnlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.records[obj]; r != nil && r.from != "" && r.from != rv {
		r.from = ""
		e.mark(obj, r)
		e.tidy(obj)
	}
	return false
}

// current keeps of objs (named by key) those render.Offerable offers to holder, given the
// writes of ours pending on them: the members a claim may be offered, asked of a pool's every
// member on every claim pass, under one read lock.
func current[T interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}](e *expectations, key func(namespace, name string) objectKey, objs []T, holder types.UID) []T {
	out := objs[:0:0]
	var moved []objectKey
	e.mu.RLock()
	// The marked records of this key's kind, by namespace and name: usually none, or the few
	// adoptions in flight; every other object needs no lookup.
	var mine map[[2]string]*record
	for k := range e.marked {
		if key(k.namespace, k.name) == k {
			if mine == nil {
				mine = map[[2]string]*record{}
			}
			mine[[2]string{k.namespace, k.name}] = e.records[k]
		}
	}
	for _, o := range objs {
		var w *render.PendingWrite
		if r := mine[[2]string{o.GetNamespace(), o.GetName()}]; r != nil {
			w = &render.PendingWrite{From: r.from, Holder: r.holder}
		}
		offer, settled := render.Offerable(w, o.GetResourceVersion(), holder)
		if settled {
			moved = append(moved, key(o.GetNamespace(), o.GetName())) // the cache has moved past our write: forget it
		}
		if offer {
			out = append(out, o)
		}
	}
	e.mu.RUnlock()
	if len(moved) > 0 {
		e.mu.Lock()
		for _, k := range moved {
			if r := e.records[k]; r != nil {
				r.from = ""
				e.mark(k, r)
				e.tidy(k)
			}
		}
		e.mu.Unlock()
	}
	return out
}

// begin marks a write to obj in flight for holder; false when another holder's is.
func (e *expectations) begin(obj objectKey, holder types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	if r.holder != "" && r.holder != holder {
		return false
	}
	r.holder = holder
	e.mark(obj, r)
	return true
}

// busy reports whether a write to obj is in flight for a holder other than holder.
func (e *expectations) busy(obj objectKey, holder types.UID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := e.records[obj]
	return r != nil && r.holder != "" && r.holder != holder
}

// end ends holder's write in flight to obj.
func (e *expectations) end(obj objectKey, holder types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.records[obj]; r != nil && r.holder == holder {
		r.holder = ""
		e.mark(obj, r)
		e.tidy(obj)
	}
}

// firstReady records obj (of that UID) as Ready and reports whether this process had not seen it
// Ready before: a Sandbox Ready again after a resume or a lost Pod has not been waited for since
// its creation, and its age would swamp a histogram of seconds. An object already Ready when this
// process starts is recorded on its first pass; one that is not (suspended, say) counts once when
// it is.
func (e *expectations) firstReady(obj objectKey, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	if r.readyUID == uid {
		return false
	}
	r.readyUID = uid
	return true
}

// applied records upstream's annotations applied to obj of that UID.
func (e *expectations) applied(obj objectKey, uid types.UID, ann map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, true)
	if r.annotatedUID != uid {
		r.annotated = nil
	}
	r.annotated, r.annotatedUID = maps.Clone(ann), uid
	if r.annotated == nil {
		r.annotated = map[string]string{}
	}
}

// annotations are upstream's annotations applied to obj of that UID (nil if none).
func (e *expectations) annotations(obj objectKey, uid types.UID) map[string]string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.records[obj]; r != nil && r.annotatedUID == uid {
		return r.annotated
	}
	return nil
}

// reportedOn is the refusal last reported on obj; report records msg as it ("" once it no
// longer stands).
func (e *expectations) reportedOn(obj objectKey) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.records[obj]; r != nil {
		return r.reported
	}
	return ""
}

func (e *expectations) report(obj objectKey, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(obj, msg != "")
	if r == nil {
		return
	}
	r.reported = msg
	e.tidy(obj)
}

// forget drops everything remembered of obj and its status: the object is gone (or being
// deleted), and an object made again under its name is another.
func (e *expectations) forget(obj objectKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.records, obj)
	delete(e.records, statusKey(obj))
	delete(e.marked, obj)
	delete(e.marked, statusKey(obj))
	for k := range e.owned[obj] {
		if r := e.records[k]; r != nil && r.owner == obj {
			r.created, r.deleted = time.Time{}, time.Time{}
			if r.from != "" && k.kind != obj.kind {
				r.from = ""
				e.mark(k, r)
			}
			e.tidy(k)
		}
	}
	delete(e.owned, obj)
}
