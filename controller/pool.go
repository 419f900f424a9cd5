package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;patch

// PoolReconciler keeps each SandboxWarmPool at spec.replicas members with render.PlanPool's
// plan: deterministic member names, orphans taken in, stale and stuck members replaced, scale
// down least useful first, and the status (which the scale subresource reads).
type PoolReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Events    *eventSink
	Now       func() time.Time
	configs   *renderConfigs
	// inFlight remembers members this controller created or deleted that the cache has not
	// shown yet, so a pass on a lagging cache neither creates a member twice nor over-fills.
	inFlight expectations
}

// Reconcile runs one pass over a pool: read, plan, create / take in / delete, status.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.inFlight.forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	opts, inForce, err := r.configs.options(ctx, req.Namespace)
	if err != nil || !inForce {
		return ctrl.Result{}, err
	}
	now := r.now()

	var obs render.PoolObservation
	t := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, t); err == nil {
		obs.Template = t
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	members := &agentsv1beta1.SandboxList{}
	if err := r.Client.List(ctx, members, client.InNamespace(pool.Namespace), client.MatchingFields{warmPoolIndex: render.NameHash(pool.Name)}); err != nil {
		return ctrl.Result{}, err
	}
	all := &agentsv1beta1.SandboxList{}
	if err := r.Client.List(ctx, all, client.InNamespace(pool.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	obs.Taken = make(map[string]bool, len(all.Items))
	sandboxNames := make(map[string]bool, len(all.Items))
	for i := range all.Items {
		obs.Taken[all.Items[i].Name] = true
		sandboxNames[all.Items[i].Name] = true
	}
	// A deleted member's Pod outlives it until garbage collection; a new member of that name
	// would find a Pod it does not own. Names with a Pod are taken too.
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(pool.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	for i := range pods.Items {
		obs.Taken[pods.Items[i].Name] = true
	}
	key := req.String()
	creating, deleting := r.inFlight.pending(key, sandboxNames, now)
	obs.InFlightCreates, obs.InFlightDeletes = len(creating), len(deleting)
	for _, name := range creating {
		obs.Taken[name] = true
	}
	for i := range members.Items {
		// A member deleted by an earlier pass that the cache still shows is terminating, and
		// counted as such, not as a member.
		if !slices.Contains(deleting, members.Items[i].Name) {
			obs.Sandboxes = append(obs.Sandboxes, &members.Items[i])
		}
	}

	plan := render.PlanPool(pool, obs, now, opts)

	var created, deleted []string
	for _, sb := range plan.Adopt {
		if _, err := applySandbox(ctx, r.Client, sb, ""); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, d := range plan.Delete {
		// Conditional on the version read: a member a claim adopted meanwhile is not deleted
		// from under it (the 409 leaves it to the next pass, which sees the adoption).
		uid, rv := d.Sandbox.UID, d.Sandbox.ResourceVersion
		err := r.Client.Delete(ctx, d.Sandbox.DeepCopy(), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting Sandbox %q of SandboxWarmPool %q: %w", d.Sandbox.Name, pool.Name, err)
		}
		r.inFlight.expectDelete(key, d.Sandbox.Name, now)
		deleted = append(deleted, fmt.Sprintf("%q (%s)", d.Sandbox.Name, d.Reason))
	}
	made := make([]bool, len(plan.Create)) // by index: the workers write apart
	err = parallel(len(plan.Create), func(i int) error {
		sb := plan.Create[i]
		r.inFlight.expectCreate(key, sb.Name, now)
		// Create only: a name the cache did not show as taken is never applied over (it could be
		// a member a claim has just adopted).
		_, err := applySandbox(ctx, r.Client, sb, createOnly)
		if err != nil {
			r.inFlight.forgetName(key, sb.Name)
		}
		if apierrors.IsConflict(err) {
			return nil
		}
		made[i] = err == nil
		return err
	})
	for i, sb := range plan.Create {
		if made[i] {
			created = append(created, fmt.Sprintf("%q", sb.Name))
		}
	}
	if len(created) > 0 {
		r.Events.normal(pool, "Created", "Created Sandboxes "+strings.Join(created, ", "))
	}
	if len(deleted) > 0 {
		r.Events.normal(pool, "Deleted", "Deleted Sandboxes "+strings.Join(deleted, ", "))
	}
	if plan.LimitedTo > 0 && pool.Status.Replicas < plan.LimitedTo {
		// Said while the pool grows to the limit, not on every pass after.
		r.Events.warning(pool, "ReplicasOverLimit", fmt.Sprintf("spec.replicas %d is more than the limit of %d members per pool; kept at the limit (raise it with the render config's spec.maxPoolReplicas)", render.Replicas(pool), plan.LimitedTo))
	}
	if len(plan.Held) > 0 {
		r.Events.warning(pool, "WarmPoolNotProgressing", fmt.Sprintf("Sandbox %q is not Ready after %v and its Pod cannot be scheduled; kept", plan.Held[0].Name, render.PoolReadinessGrace))
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	if render.PoolStatusNeedsWrite(&pool.Status, &plan.Status) {
		updated := pool.DeepCopy()
		updated.Status = plan.Status
		if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(pool), client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("writing the status of SandboxWarmPool %q: %w", pool.Name, err)
		}
	}
	result := ctrl.Result{RequeueAfter: plan.RequeueAfter}
	if obs.InFlightCreates+obs.InFlightDeletes > 0 || len(plan.Create)+len(plan.Delete) > 0 {
		// The watch events of these writes bring the next pass; this is the safety net.
		result.RequeueAfter = minPositive(result.RequeueAfter, expectationTimeout)
	}
	return result, nil
}

func (r *PoolReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// parallel runs f for 0..n-1 in slow-start batches (1, 2, 4, …), as upstream creates members:
// a failing API server sees one request, not hundreds.
func parallel(n int, f func(i int) error) error {
	done := 0
	for batch := 1; done < n; batch *= 2 {
		size := min(batch, n-done)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for i := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(done + i)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		done += size
	}
	return nil
}

// expectationTimeout is how long a create or delete the cache has not shown is still expected.
const expectationTimeout = 30 * time.Second

// expectations are the members a pool's passes created or deleted, until the cache shows them.
type expectations struct {
	mu    sync.Mutex
	pools map[string]map[string]expected
}

type expected struct {
	create bool
	at     time.Time
}

func (e *expectations) expectCreate(pool, name string, now time.Time) { e.set(pool, name, true, now) }
func (e *expectations) expectDelete(pool, name string, now time.Time) { e.set(pool, name, false, now) }

func (e *expectations) set(pool, name string, create bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pools == nil {
		e.pools = map[string]map[string]expected{}
	}
	if e.pools[pool] == nil {
		e.pools[pool] = map[string]expected{}
	}
	e.pools[pool][name] = expected{create: create, at: now}
}

func (e *expectations) forgetName(pool, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pools[pool], name)
}

func (e *expectations) forget(pool string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pools, pool)
}

// pending settles the expectations against the names the cache shows (a create is met when the
// name appears, a delete when it is gone) and returns the ones still open.
func (e *expectations) pending(pool string, present map[string]bool, now time.Time) (creates, deletes []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, x := range e.pools[pool] {
		if present[name] == x.create || now.Sub(x.at) > expectationTimeout {
			delete(e.pools[pool], name)
			continue
		}
		if x.create {
			creates = append(creates, name)
		} else {
			deletes = append(deletes, name)
		}
	}
	return creates, deletes
}
