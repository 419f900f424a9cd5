package controller

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;patch

// PoolReconciler keeps each SandboxWarmPool at spec.replicas members with render.PlanPool's
// plan: deterministic member names, orphans taken in, stale and stuck members replaced (stale
// ones a few at a time under RollingUpdate: a member's Ready event brings the pass that goes on,
// through the Sandbox watch), scale down least useful first, and the status (which the scale
// subresource reads).
type PoolReconciler struct {
	x       *executor
	configs *renderConfigs
	workers int
	// members is the index of pool members shared with the claim reconciler (poolMembers).
	members *pointerIndex[*agentsv1beta1.Sandbox]
}

// SetupWithManager registers the reconciler: pools, their members' events (an orphan's by its
// warm-pool label), their templates, and the SandboxRenders that govern them.
func (r *PoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	return controllerFor(mgr, r.x, "sandboxwarmpool", &extv1beta1.SandboxWarmPool{}, extv1beta1.GroupVersion.Group, extv1beta1.SandboxWarmPoolKind, r.workers,
		func() client.ObjectList { return &extv1beta1.SandboxWarmPoolList{} }).
		Watches(&agentsv1beta1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(poolOfMember(c))).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(poolsOfTemplate(c))).
		Complete(r)
}

// Reconcile runs one pass over a pool: observe, render.PlanPool, execute, status.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileWith(ctx, r.x, r.configs, req, &extv1beta1.SandboxWarmPool{}, r.observe, r.keepsReserve)
}

// keepsReserve says whether nobody waits on the pool's pass (render.PoolKeepsReserve), on its
// members in the cache rather than its status: the status is written by the very passes the gate
// holds, so during a stream of claims it would not show the members taken yet.
// While it holds, the pass waits for the gate to open however long the stream; once the claims
// have taken the pool below its reserve, its refill goes at once.
func (r *PoolReconciler) keepsReserve(ctx context.Context, pool *extv1beta1.SandboxWarmPool) bool {
	if r.x.gate.isOpen() {
		return false // nothing to wait behind: no need to count (the plan says it again)
	}
	// The index's pointers, not a cache List: a List copies every member, and this runs on every
	// member event while claims stream in, when the cores are the API server's.
	return render.PoolKeepsReserve(pool, r.members.list(pool.Namespace+"/"+render.NameHash(pool.Name)))
}

// poolPass is a pool's pass: what was found, for render.PlanPool.
type poolPass struct {
	pool  *extv1beta1.SandboxWarmPool
	found render.PoolFound
	pc    *passContext
}

func (p *poolPass) plan() *render.PoolPlan {
	return render.PlanPool(p.pool, p.found, p.pc.now, p.pc.opts)
}

// saw: a pool's steps never plan again (their conflicts are left to the next pass).
func (p *poolPass) saw(render.Step, client.Object) {}

func (p *poolPass) live(render.Step) client.Object { return nil }

func (p *poolPass) withStatus(st *extv1beta1.SandboxWarmPoolStatus) client.Object {
	u := p.pool.DeepCopy()
	u.Status = *st
	return u
}

func (p *poolPass) statusWritten(*render.PoolPlan) {}

// observe reads the pool's template, its members, and the names taken in its namespace (every
// Sandbox's, and every Pod's: a deleted member's Pod outlives it until garbage collection, and a
// new member of that name would find a Pod it does not own) from the cache, with the creates and
// deletes of earlier passes the cache does not show yet (expectations): a create counts as a
// member and takes its name, a delete as terminating. Nothing is rendered without a render config
// in force.
func (r *PoolReconciler) observe(ctx context.Context, pool *extv1beta1.SandboxWarmPool, pc *passContext) (kindPass[extv1beta1.SandboxWarmPoolStatus, *render.PoolPlan], error) {
	if !pc.inForce {
		return nil, nil
	}
	c := r.x.client
	p := &poolPass{pool: pool, pc: pc}
	t := &extv1beta1.SandboxTemplate{}
	if getCached(ctx, c, pool.Namespace, pool.Spec.TemplateRef.Name, t) {
		p.found.Template = t
	}
	members, all, pods := &agentsv1beta1.SandboxList{}, &agentsv1beta1.SandboxList{}, &corev1.PodList{}
	if err := c.List(ctx, members, client.InNamespace(pool.Namespace), client.MatchingFields{warmPoolIndex: render.NameHash(pool.Name)}); err != nil {
		return nil, err
	}
	if err := c.List(ctx, all, client.InNamespace(pool.Namespace)); err != nil {
		return nil, err
	}
	if err := c.List(ctx, pods, client.InNamespace(pool.Namespace)); err != nil {
		return nil, err
	}
	p.found.Taken = make(map[string]bool, len(all.Items)+len(pods.Items))
	sandboxes := make(map[string]bool, len(all.Items))
	for i := range all.Items {
		p.found.Taken[all.Items[i].Name], sandboxes[all.Items[i].Name] = true, true
	}
	for i := range pods.Items {
		p.found.Taken[pods.Items[i].Name] = true
	}
	present := func(k objectKey) bool { return sandboxes[k.name] }
	creating, deleting := r.x.expect.pending(keyOf(extv1beta1.SandboxWarmPoolKind, pool.Namespace, pool.Name), present, pc.now, render.PoolWriteRecheck)
	p.found.InFlightCreates, p.found.InFlightDeletes = len(creating), len(deleting)
	for _, name := range creating {
		p.found.Taken[name] = true
	}
	for i := range members.Items {
		// A member deleted by an earlier pass that the cache still shows is terminating, and
		// counted as such, not as a member.
		if !slices.Contains(deleting, members.Items[i].Name) {
			p.found.Sandboxes = append(p.found.Sandboxes, &members.Items[i])
		}
	}
	return p, nil
}
