package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// passContext is what every pass starts from: the time, and its namespace's render options.
type passContext struct {
	now time.Time
	// opts are the namespace's render options; inForce is false when no config is in force
	// there (two SandboxRenders, or an invalid one): the pass then renders nothing, and the
	// namespace keeps its last good render.
	opts    render.Options
	inForce bool
}

// begin reads the object of req from the cache into obj and the render options of its
// namespace. Nil when there is no pass to run: the object is gone or being deleted (what it owns
// goes with it through owner references), and what this process remembers of it goes too.
func begin(ctx context.Context, x *executor, configs *renderConfigs, req ctrl.Request, obj client.Object) (*passContext, error) {
	key := keyOf(kindOf(obj), req.Namespace, req.Name)
	if err := x.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			x.expect.forget(key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		x.expect.forget(key)
		return nil, nil
	}
	pc := &passContext{now: x.clock()}
	x.expect.started(pc.now)
	var err error
	pc.opts, pc.inForce, err = configs.options(ctx, req.Namespace)
	return pc, err
}

// reconcileWith is every reconciler's pass: begin (read the object and its namespace's render
// options), observe (what the cache and, where it must, the API server hold for it: a kind's
// pass, nil when there is nothing to render), then run (render.Plan*, execute, status). A kind
// for which render can tell from the object and the cache that nobody waits on its pass
// (patient, nil for the others: a pool that keeps its reserve) is held by the gate before it
// observes anything, for as long as the gate stays closed.
func reconcileWith[O client.Object, S any, P planned[S]](ctx context.Context, x *executor, configs *renderConfigs, req ctrl.Request, obj O,
	observe func(context.Context, O, *passContext) (kindPass[S, P], error), patient func(context.Context, O) bool) (res ctrl.Result, err error) {
	key := keyOf(kindOf(obj), req.Namespace, req.Name)
	x.echo.passStarts(key)
	defer func() { // even when the pass panics: the events deferred to it must bring a pass
		if x.echo.passEnds(key) && err == nil && (res.RequeueAfter <= 0 || res.RequeueAfter > deferredRetry) {
			// An event deferred to this pass (executor.deferToPass) may have come after it read.
			res.RequeueAfter = deferredRetry
		}
	}()
	return runPass(ctx, x, configs, req, obj, observe, patient)
}

// runPass is reconcileWith's pass, between passStarts and passEnds.
func runPass[O client.Object, S any, P planned[S]](ctx context.Context, x *executor, configs *renderConfigs, req ctrl.Request, obj O,
	observe func(context.Context, O, *passContext) (kindPass[S, P], error), patient func(context.Context, O) bool) (ctrl.Result, error) {
	pc, err := begin(ctx, x, configs, req, obj)
	if pc == nil || err != nil {
		return ctrl.Result{}, err
	}
	if patient != nil && patient(ctx, obj) {
		if x.gate.hold(kindOf(obj), req, true) {
			// Held before the pass reads what it plans on (a pool's every member and Pod):
			// that is most of what it would cost.
			return ctrl.Result{RequeueAfter: x.gate.p.heldRetry()}, nil
		}
		ctx = context.WithValue(ctx, gatePassed{}, true) // not held again once planned
	}
	k, err := observe(ctx, obj, pc)
	if k == nil || err != nil {
		return ctrl.Result{}, err
	}
	return run(ctx, x, obj, k)
}

// gatePassed marks a pass's context once the gate has let it through.
type gatePassed struct{}

// getCached reads the object of that name from the cache; false if it is not there (an error
// other than not found is logged: the pass goes on as if it were absent, and its create is
// refused if it is not).
func getCached(ctx context.Context, c client.Reader, ns, name string, obj client.Object) bool {
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "reading from the cache", "name", name)
	}
	return err == nil
}

// controllerFor starts the controller every rendering reconciler has: its name, its kind, its
// logs, its workers, its objects' events less the echoes of its own status writes that need no
// pass (executor.echoes), a watch of the SandboxRenders that govern its objects (list lists them),
// and the gate's wake-ups of its held passes.
func controllerFor(mgr ctrl.Manager, x *executor, name string, obj client.Object, group, kind string, workers int, list func() client.ObjectList) *builder.TypedBuilder[reconcile.Request] {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(obj, builder.WithPredicates(x.echoes(kind))).
		WithLogConstructor(reconcileLogs(mgr.GetLogger(), name, group, kind)).
		Watches(governs(mgr.GetClient(), list)).
		WatchesRawSource(x.gate.source(kind)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
}

// governs is the watch that re-renders the objects of one kind a SandboxRender governs when it
// changes (a new generation; its status writes do not).
func governs(c client.Reader, list func() client.ObjectList) (client.Object, handler.EventHandler, builder.WatchesOption) {
	return &renderv1alpha1.SandboxRender{}, handler.EnqueueRequestsFromMapFunc(governed(c, list)),
		builder.WithPredicates(predicate.GenerationChangedPredicate{})
}
