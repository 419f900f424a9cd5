package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// executor carries out the plans render makes, for every kind: it sends each step with its
// precondition (server-side apply with the owned-fields compare, create-only, on a
// resourceVersion; delete on a UID and resourceVersion), plans again when a step's conflict asks
// for it, writes the status, records the events, and remembers its writes in the expectations
// until the cache shows them. It decides nothing about what an object looks like, or which
// object a pass takes: that is the plan's.
type executor struct {
	client client.Client
	// reader reads from the API server: objects the cache does not show yet, and an object a
	// scoped intent is sent to (see applier.reader).
	reader  client.Reader
	applies *applyTransport
	events  *eventSink
	expect  *expectations
	// echo decides which watch events of claims and Sandboxes bring a pass (see echoWaits).
	echo *echoWaits
	// gate holds background passes behind foreground ones (render.Plan.Background).
	gate *gate
	// now is the clock; time.Now when nil. Time enters render only as this value.
	now func() time.Time
}

func (x *executor) clock() time.Time {
	if x.now != nil {
		return x.now()
	}
	return time.Now()
}

// planned is a kind's plan: render.SandboxPlan, TemplatePlan, PoolPlan or ClaimPlan, each
// embedding render.Plan.
type planned[S any] interface {
	Pass() *render.Plan[S]
}

// kindPass is one object's pass as its reconciler hands it to the executor.
type kindPass[S any, P planned[S]] interface {
	// plan plans the pass from what was found so far.
	plan() P
	// saw adds what the API server holds under a step's name (nil: nothing there, or nothing
	// the pass may take now), read after a conflict or before a create the cache may not show.
	saw(step render.Step, obj client.Object)
	// live is the object a step writes as found, for the owned-fields compare; nil when none
	// was found or the kind keeps no managedFields in the cache.
	live(step render.Step) client.Object
	// withStatus is a copy of the object with a planned status, for the status write.
	withStatus(st *S) client.Object
	// statusWritten is called once a status write is sent (the latency metrics).
	statusWritten(plan P)
}

// errHeld ends a background pass the gate holds: it sends nothing, and the gate wakes it.
var errHeld = errors.New("held behind writes somebody waits on")

// errAwaitCache ends a pass that would create an object this process created a moment ago whose
// watch event has not reached the cache yet: that event brings the next pass.
var errAwaitCache = errors.New("awaiting the cache")

// run executes one pass of obj: plan, steps (planning again on a conflict that says so), the
// status, the writes after it, the events; and says when to come back.
func run[S any, P planned[S]](ctx context.Context, x *executor, obj client.Object, k kindPass[S, P]) (reconcile.Result, error) {
	start := x.clock()
	plan, wrote, done, err := steps(ctx, x, obj, k)
	defer done()
	switch {
	case errors.Is(err, errAwaitCache):
		// The cache's event brings the next pass; the requeue is the safety net.
		return reconcile.Result{RequeueAfter: awaitCacheRetry}, nil
	case errors.Is(err, errHeld):
		// The gate wakes it; the requeue is the safety net.
		return reconcile.Result{RequeueAfter: x.gate.p.heldRetry()}, nil
	}
	if err != nil {
		x.events.record(obj, written(wrote)...)
		return reconcile.Result{}, refused(ctx, x, obj, k, plan, err)
	}
	p := plan.Pass()
	settle := p.SettleAfterWrites.Duration > 0 && len(wrote) > 0
	if p.WriteStatus && !settle {
		updated := k.withStatus(p.Status)
		sent, err := x.writeStatus(ctx, obj, updated, p.StatusPrecondition)
		if err != nil {
			return reconcile.Result{}, err
		}
		if sent {
			awaitEcho(x, obj, updated, k, plan, wrote)
			k.statusWritten(plan)
			x.events.record(obj, p.StatusEvents...)
		}
	}
	for _, s := range p.After {
		if _, err := x.send(ctx, obj, s, nil); err != nil {
			return reconcile.Result{}, err
		}
	}
	// The events go last: nobody waits on them.
	x.events.record(obj, written(wrote)...)
	x.events.record(obj, p.Events...)
	result := reconcile.Result{RequeueAfter: p.RequeueAfter.Duration}
	if settle && (result.RequeueAfter <= 0 || result.RequeueAfter > p.SettleAfterWrites.Duration) {
		result.RequeueAfter = p.SettleAfterWrites.Duration
	}
	if l := log.FromContext(ctx).V(1); l.Enabled() {
		l.Info("pass", "took", x.clock().Sub(start).String(), "steps", len(p.Steps), "wrote", len(wrote))
	}
	if p.Error != "" {
		return result, errors.New(p.Error)
	}
	return result, nil
}

// written are the events of the steps that wrote: one, or none (render.WrittenEvent).
func written(steps []render.Step) []render.Event {
	if e := render.WrittenEvent(steps); e != nil {
		return []render.Event{*e}
	}
	return nil
}

// refused ends a pass whose step failed. When the API server refused the write on its merits
// (render.RefusedOnMerits), retrying will not change that until someone acts, so the object
// says why in its status, as upstream's Sandbox does for any error of a pass (the plan's
// Refused, for the kinds that have one).
func refused[S any, P planned[S]](ctx context.Context, x *executor, obj client.Object, k kindPass[S, P], plan P, err error) error {
	r, ok := any(plan).(interface {
		Refused(error) *render.Plan[S]
	})
	if !ok || !render.RefusedOnMerits(err) {
		return err
	}
	rp := r.Refused(err)
	if rp == nil || !rp.WriteStatus {
		return err
	}
	sent, serr := x.writeStatus(ctx, obj, k.withStatus(rp.Status), rp.StatusPrecondition)
	if serr != nil {
		return errors.Join(err, serr)
	}
	if sent {
		x.events.record(obj, rp.StatusEvents...)
	}
	return err
}

// steps plans the pass and sends its steps. A background pass the gate holds sends nothing; a
// foreground pass that writes marks its writes in flight until done is called. Before anything
// is sent, a create of an object this process created that the cache does not show is awaited
// (within cacheLag) or read from the API server and planned with: re-sending it would be a
// refused write. A step whose precondition fails with ConflictReplan has its object, and the
// objects this pass created, read from the API server, and the pass is planned again with them.
func steps[S any, P planned[S]](ctx context.Context, x *executor, obj client.Object, k kindPass[S, P]) (plan P, wrote []render.Step, done func(), err error) {
	plan = k.plan()
	done = func() {}
	switch p := plan.Pass(); {
	case p.Background && ctx.Value(gatePassed{}) == nil && x.gate.hold(kindOf(obj), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, false):
		return plan, nil, done, errHeld
	case !p.Background && (len(p.Steps) > 0 || p.WriteStatus):
		done = x.gate.foreground()
	}
	plan, wrote, err = sendSteps(ctx, x, obj, k, plan)
	return plan, wrote, done, err
}

// sendSteps sends the steps of plan, as steps says.
func sendSteps[S any, P planned[S]](ctx context.Context, x *executor, obj client.Object, k kindPass[S, P], plan P) (P, []render.Step, error) {
	now := x.clock()
	var recent []render.Step
	for _, s := range plan.Pass().Steps {
		key := keyOf(s.Kind, obj.GetNamespace(), s.Name)
		if s.Action != render.ActionCreate {
			continue
		}
		switch x.gate.p.pending(x.expect.createdAt(key), now) {
		case awaitCache:
			return plan, nil, errAwaitCache
		case readFirst:
			recent = append(recent, s)
		}
	}
	if len(recent) > 0 {
		if err := reread(ctx, x, obj, k, recent); err != nil {
			return plan, nil, err
		}
		plan = k.plan()
	}
	var wrote []render.Step
	for round := 0; ; round++ {
		done, lost, err := x.sendAll(ctx, obj, plan.Pass().Steps, k.live)
		wrote = append(wrote, done...)
		if err != nil || lost == nil {
			return plan, wrote, err
		}
		if round == maxReplans {
			return plan, wrote, fmt.Errorf("%s %q: %s kept meeting changes (%d plans); trying again", kindOf(obj), obj.GetName(), lost.step, round+1)
		}
		log.FromContext(ctx).V(1).Info("a step met a change; planning again", "step", lost.step.String(), "inFlight", lost.inFlight)
		if lost.inFlight {
			k.saw(lost.step, nil) // another worker's write is on its way: not for this pass
		} else if err := reread(ctx, x, obj, k, append([]render.Step{lost.step}, created(done)...)); err != nil {
			return plan, wrote, err
		}
		plan = k.plan()
	}
}

// created are the create steps among steps.
func created(steps []render.Step) []render.Step {
	var out []render.Step
	for _, s := range steps {
		if s.Action == render.ActionCreate {
			out = append(out, s)
		}
	}
	return out
}

// reread reads the objects of steps from the API server and hands each to the pass.
func reread[S any, P planned[S]](ctx context.Context, x *executor, obj client.Object, k kindPass[S, P], steps []render.Step) error {
	for _, s := range steps {
		o := newObject(s.Kind)
		if o == nil {
			return fmt.Errorf("step %s: not a kind this controller reads", s)
		}
		switch err := x.reader.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: s.Name}, o); {
		case apierrors.IsNotFound(err):
			o = nil
		case err != nil:
			return fmt.Errorf("reading %s %q: %w", s.Kind, s.Name, err)
		}
		if o == nil {
			k.saw(s, nil)
		} else {
			k.saw(s, o)
		}
	}
	return nil
}

// lostStep is a step whose precondition failed with ConflictReplan, or that another worker's
// write to the same object was in flight for.
type lostStep struct {
	step     render.Step
	inFlight bool
}

// sendAll sends steps in order (runs of Concurrent steps in slow-start batches) and returns the
// steps that wrote, and the first whose precondition failed with ConflictReplan (the rest are
// then not sent). A failed precondition of any other step leaves it to the next pass.
func (x *executor) sendAll(ctx context.Context, obj client.Object, steps []render.Step, live func(render.Step) client.Object) ([]render.Step, *lostStep, error) {
	var wrote []render.Step
	for i := 0; i < len(steps); {
		if steps[i].Concurrent {
			j := i
			for j < len(steps) && steps[j].Concurrent {
				j++
			}
			done, err := x.sendBatch(ctx, obj, steps[i:j], live)
			wrote = append(wrote, done...)
			if err != nil {
				return wrote, nil, err
			}
			i = j
			continue
		}
		s := steps[i]
		i++
		o, err := x.send(ctx, obj, s, live(s))
		var conflict *conflictError
		switch {
		case errors.As(err, &conflict) && s.OnConflict == render.ConflictReplan:
			return wrote, &lostStep{step: s, inFlight: conflict.inFlight}, nil
		case errors.As(err, &conflict):
			continue
		case err != nil:
			return wrote, nil, err
		case o != Unchanged:
			wrote = append(wrote, s)
		}
	}
	return wrote, nil, nil
}

// sendBatch sends steps in slow-start batches (parallel.SlowStart); a failed precondition leaves
// a step to the next pass.
func (x *executor) sendBatch(ctx context.Context, obj client.Object, steps []render.Step, live func(render.Step) client.Object) ([]render.Step, error) {
	outcomes := make([]Outcome, len(steps)) // by index: the workers write apart
	err := parallel.SlowStart(len(steps), func(i int) error {
		o, err := x.send(ctx, obj, steps[i], live(steps[i]))
		if conflict := (*conflictError)(nil); errors.As(err, &conflict) {
			return nil
		}
		outcomes[i] = o
		return err
	})
	var wrote []render.Step
	for i, o := range outcomes {
		if o != "" && o != Unchanged {
			wrote = append(wrote, steps[i])
		}
	}
	return wrote, err
}

// send sends one step of obj's pass and remembers what it wrote until the cache shows it. A
// write on a resourceVersion is sent by one worker at a time: another's in flight to the same
// object is a conflict, as the API server would make it.
func (x *executor) send(ctx context.Context, obj client.Object, s render.Step, live client.Object) (Outcome, error) {
	key := keyOf(s.Kind, obj.GetNamespace(), s.Name)
	if pre := s.Precondition; pre != nil && pre.ResourceVersion != "" && s.Action != render.ActionDelete {
		if !x.expect.begin(key, obj.GetUID()) {
			return "", &conflictError{step: s, inFlight: true}
		}
		defer x.expect.end(key, obj.GetUID())
	}
	a := applier{client: x.client, reader: x.reader, applies: x.applies}
	var o Outcome
	var err error
	if s.Action == render.ActionDelete {
		o, err = a.delete(ctx, obj.GetNamespace(), s)
	} else {
		o, err = a.apply(ctx, s, live)
	}
	if err != nil || o == Unchanged {
		return o, err
	}
	x.remember(obj, key, s, o)
	return o, nil
}

// remember records a write the cache will show later: a create or delete (by obj's pass), a
// write on a resourceVersion, upstream's annotations.
func (x *executor) remember(obj client.Object, key objectKey, s render.Step, o Outcome) {
	owner := keyOf(kindOf(obj), obj.GetNamespace(), obj.GetName())
	switch {
	case s.Manager == render.ManagerUpstreamAnnotations:
		x.expect.applied(key, obj.GetUID(), s.Intent.Object.GetAnnotations())
		if key == owner {
			// The pass's own object moved past the version it read: a status write on that
			// version would be refused with a conflict until the cache shows the annotations
			// (render.ClaimPlan holds a claim's Ready status behind them).
			x.expect.wroteOn(statusKey(key), objectKey{}, "", obj.GetResourceVersion())
		}
	case o == Deleted:
		x.expect.deleted(key, owner, x.clock())
	case o == Created:
		x.expect.created(key, owner, obj.GetUID(), x.clock())
	case s.Precondition != nil && s.Precondition.ResourceVersion != "":
		x.expect.wroteOn(key, owner, obj.GetUID(), s.Precondition.ResourceVersion)
	}
}

// writeStatus writes the status updated carries through the status subresource, as a JSON merge
// patch against obj as read (the conditions list is replaced whole, so their order is the one
// render computed), on obj's resourceVersion when pre asks for it. It is not sent while the
// cache still shows the version our last status write started from (the write's own watch
// event brings the pass that has seen it; writing again would send the same status twice); a
// conflict or a missing object drops it (their watch events bring the next pass). It reports
// whether the write was sent.
func (x *executor) writeStatus(ctx context.Context, obj, updated client.Object, pre *render.Precondition) (bool, error) {
	key := statusKey(keyOf(kindOf(obj), obj.GetNamespace(), obj.GetName()))
	if x.expect.stale(key, obj.GetResourceVersion()) {
		return false, nil
	}
	var opts []client.MergeFromOption
	if pre != nil && pre.ResourceVersion != "" {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	err := x.client.Status().Patch(ctx, updated, client.MergeFromWithOptions(obj, opts...), client.FieldOwner(FieldManager))
	if render.StatusWriteDropped(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing the status of %s %q: %w", kindOf(obj), obj.GetName(), err)
	}
	x.expect.wroteOn(key, objectKey{}, "", obj.GetResourceVersion())
	return true, nil
}

// echoPlanner is a kind's pass that can tell whether the watch event of its status write (its
// echo) needs a pass: wrote are the steps that wrote before it, updated the object as the write
// left it (the API server's answer).
type echoPlanner[P any] interface {
	echoNeedsNoPass(plan P, wrote []render.Step, updated client.Object) bool
}

// awaitEcho records the echo of the status write just sent on obj as one that needs no pass,
// when the pass's kind says so and nothing is written after the status (upstream's annotations
// would be the event's change, not the status). Only this write's echo is let go: it must take
// obj from the version the pass read to the version the write made (echoWaits.echoed).
func awaitEcho[S any, P planned[S]](x *executor, obj, updated client.Object, k kindPass[S, P], plan P, wrote []render.Step) {
	e, ok := k.(echoPlanner[P])
	if !ok || len(plan.Pass().After) > 0 || updated.GetResourceVersion() == obj.GetResourceVersion() ||
		!e.echoNeedsNoPass(plan, wrote, updated) {
		return
	}
	x.echo.await(keyOf(kindOf(obj), obj.GetNamespace(), obj.GetName()), obj.GetResourceVersion(), updated.GetResourceVersion())
}

// echoes filters a kind's own watch: the update that is the echo of a status write awaitEcho
// recorded brings no pass.
func (x *executor) echoes(kind string) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o := e.ObjectNew
		if x.echo.echoed(keyOf(kind, o.GetNamespace(), o.GetName()), e.ObjectOld.GetResourceVersion(), o.GetResourceVersion()) {
			echoesLetGo.WithLabelValues(kind).Inc()
			return false
		}
		return true
	}}
}

// deferToPass filters the events of other objects that map to objects of kind (a claim's
// Sandbox, a Sandbox's children): one for an object whose pass is under way, or whose status
// write's echo is awaited, brings no pass of its own; what comes next for that object anyway
// reads it (echoWaits.deferred).
func (x *executor) deferToPass(kind string, m handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		reqs := m(ctx, o)
		kept := reqs[:0]
		for _, r := range reqs {
			if x.echo.deferred(keyOf(kind, r.Namespace, r.Name)) {
				eventsDeferred.WithLabelValues(kind).Inc()
				continue
			}
			kept = append(kept, r)
		}
		return kept
	}
}

// firstReady reports whether obj's status turns Ready with this write for the first time this
// process has seen (see expectations.firstReady).
func (x *executor) firstReady(obj client.Object, wasReady, ready bool) bool {
	return !wasReady && ready && x.expect.firstReady(keyOf(kindOf(obj), obj.GetNamespace(), obj.GetName()), obj.GetUID())
}
