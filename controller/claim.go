package controller

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;delete;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;patch;delete

// ClaimReconciler gives each SandboxClaim one Sandbox with render.PlanClaim's plan: the one it
// already has, else a Ready (or networked) member of its warm pool adopted under a
// resourceVersion lock, else a cold Sandbox; it re-syncs claimed Sandboxes' metadata, enforces
// the claim's lifecycle and writes its status. Every decision is render's; this only reads and
// writes.
type ClaimReconciler struct {
	x       *executor
	configs *renderConfigs
	workers int
	// members and claims index the cache's pool members (by their warm-pool label, shared with
	// the pool reconciler: see poolMembers) and claims (by their pool), which every claim pass
	// reads.
	members *pointerIndex[*agentsv1beta1.Sandbox]
	claims  *pointerIndex[*extv1beta1.SandboxClaim]
}

// SetupWithManager registers the reconciler: claims, the Sandboxes they control, their pools
// (a new or changed pool helps the claims not Ready yet), their templates (metadata edits reach
// claimed Sandboxes, and a creation unblocks waiting claims), and the SandboxRenders that govern
// them.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	if r.members == nil {
		return fmt.Errorf("the claim reconciler needs the pool members' index (Setup makes it)")
	}
	r.claims = newPointerIndex(func(c *extv1beta1.SandboxClaim) string { return c.Namespace + "/" + c.Spec.WarmPoolRef.Name })
	if err := addIndexHandler(mgr, &extv1beta1.SandboxClaim{}, r.claims.handler()); err != nil {
		return err
	}
	return controllerFor(mgr, r.x, "sandboxclaim", &extv1beta1.SandboxClaim{}, extv1beta1.GroupVersion.Group, extv1beta1.SandboxClaimKind, r.workers,
		func() client.ObjectList { return &extv1beta1.SandboxClaimList{} }).
		Watches(&agentsv1beta1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.x.deferToPass(extv1beta1.SandboxClaimKind, controllerOfKind(extv1beta1.SandboxClaimKind)))).
		Watches(&extv1beta1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(claimsOfPool(c)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(claimsOfTemplate(c))).
		Complete(r)
}

// Reconcile runs one pass over a claim: observe, render.PlanClaim, execute, status, and
// upstream's annotations after it when asked for.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileWith(ctx, r.x, r.configs, req, &extv1beta1.SandboxClaim{}, r.observe, nil)
}

// claimPass is a claim's pass: what was found, for render.PlanClaim.
type claimPass struct {
	x     *executor
	claim *extv1beta1.SandboxClaim
	found render.ClaimFound
	pc    *passContext
}

func (p *claimPass) plan() *render.ClaimPlan {
	return render.PlanClaim(p.claim, p.found, p.pc.now, p.pc.opts)
}

func (p *claimPass) saw(s render.Step, obj client.Object) { p.found.Saw(s, obj) }

func (p *claimPass) live(render.Step) client.Object { return nil }

func (p *claimPass) withStatus(st *extv1beta1.SandboxClaimStatus) client.Object {
	u := p.claim.DeepCopy()
	u.Status = *st
	return u
}

// echoNeedsNoPass says whether the echo of this pass's status write needs no pass. The claim's
// Sandbox, when the pass wrote it (created, adopted, updated or deleted), brings one with its own
// events: it is the claim's, and controllerOfKind maps them back (an event that comes while the
// echo is awaited is deferred to it, which then brings the pass). With nothing written, render
// decides on the claim as the write left it, the API server's answer (render.EchoNeedsNoPass).
func (p *claimPass) echoNeedsNoPass(plan *render.ClaimPlan, wrote []render.Step, updated client.Object) bool {
	claim, ok := updated.(*extv1beta1.SandboxClaim)
	if !ok {
		return false
	}
	if len(wrote) > 0 {
		for _, s := range wrote {
			if s.Kind != agentsv1beta1.SandboxKind {
				return false
			}
		}
		return claim.Generation == p.claim.Generation && maps.Equal(claim.Labels, p.claim.Labels) && maps.Equal(claim.Annotations, p.claim.Annotations)
	}
	next := *p
	next.claim = claim
	return render.EchoNeedsNoPass(&next.plan().Plan, plan.RequeueAfter.Duration)
}

func (p *claimPass) statusWritten(plan *render.ClaimPlan) {
	was := meta.IsStatusConditionTrue(p.claim.Status.Conditions, agentsv1beta1.ConditionReady)
	if p.x.firstReady(p.claim, was, meta.IsStatusConditionTrue(plan.Status.Conditions, agentsv1beta1.ConditionReady)) {
		observeClaimReady(plan.LaunchType, p.x.clock().Sub(p.claim.CreationTimestamp.Time))
	}
}

// observe gathers the claim's render.ClaimFound: its Sandbox, the object under its name when
// render.ClaimNameToRead asks for it, its pool and template, and the pool's members and claims
// from the cache, less those this process's writes have made stale or are in flight on. A claim
// is planned even without a render config in force: its lifecycle runs whatever the config.
func (r *ClaimReconciler) observe(ctx context.Context, claim *extv1beta1.SandboxClaim, pc *passContext) (kindPass[extv1beta1.SandboxClaimStatus, *render.ClaimPlan], error) {
	p := &claimPass{x: r.x, claim: claim, pc: pc}
	f := &p.found
	var err error
	if f.Sandbox, err = r.claimedSandbox(ctx, claim); err != nil {
		return nil, err
	}
	if name, read := render.ClaimNameToRead(claim, *f, pc.now); read {
		if f.Named, err = r.named(ctx, claim, name, render.ClaimExpiry(claim, pc.now).Step == render.NotExpired); err != nil {
			return nil, err
		}
	}
	f.NoConfig = !pc.inForce
	f.Annotations = r.x.expect.annotations(keyOf(extv1beta1.SandboxClaimKind, claim.Namespace, claim.Name), claim.UID)
	f.Pool = r.resolve(ctx, claim)
	if f.Sandbox == nil && f.Pool.Pool != nil && f.Pool.Pool.UID != "" {
		r.candidates(claim, f)
	}
	return p, nil
}

// candidates are the pool's members a claim may be offered and the claims of the pool, from the
// cache, less those whose cached version a write of ours has moved past (stale) and the members
// another claim's adoption is in flight on; and the order the informer listed the members in.
func (r *ClaimReconciler) candidates(claim *extv1beta1.SandboxClaim, f *render.ClaimFound) {
	e := r.x.expect
	pool := f.Pool.Pool.Name
	f.Claims = current(e, func(ns, name string) objectKey { return statusKey(keyOf(extv1beta1.SandboxClaimKind, ns, name)) },
		r.claims.list(claim.Namespace+"/"+pool), "")
	members, arrival := r.members.listArrivals(claim.Namespace + "/" + render.NameHash(pool))
	f.Members = current(e, func(ns, name string) objectKey { return keyOf(agentsv1beta1.SandboxKind, ns, name) }, members, claim.UID)
	f.Arrival = arrival
}

// claimedSandbox finds the Sandbox a claim controls: from the cache by its claim-uid label, and
// when the cache has none, from the API server, so a pass never adopts or creates a second
// Sandbox because the cache has not yet seen the first. The API server is asked only when this
// process created or adopted one for the claim that the cache does not show yet, or when the
// claim is older than this process's first pass (a Sandbox made before it would not be known).
func (r *ClaimReconciler) claimedSandbox(ctx context.Context, claim *extv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	list := &agentsv1beta1.SandboxList{}
	if err := r.x.client.List(ctx, list, client.InNamespace(claim.Namespace), client.MatchingFields{claimUIDIndex: string(claim.UID)}); err != nil {
		return nil, err
	}
	owner := keyOf(extv1beta1.SandboxClaimKind, claim.Namespace, claim.Name)
	if sb := render.ClaimedSandbox(claim, list.Items); sb != nil {
		r.x.expect.release(owner) // the cache has it now
		// And it shows the adoption, which moved the member past the version it was adopted on:
		// that write is settled. Nothing else would settle it, since an adopted member leaves its
		// pool's index (current), and every claim pass of the pool would walk the record.
		r.x.expect.stale(keyOf(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name), sb.ResourceVersion)
		return sb, nil
	}
	if name, ok := r.x.expect.acquired(owner, claim.UID, agentsv1beta1.SandboxKind); ok {
		sb := &agentsv1beta1.Sandbox{}
		err := r.x.reader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, sb)
		if err == nil && render.ClaimControls(claim, sb) {
			return sb, nil
		}
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		r.x.expect.release(owner)
	}
	if render.ClaimCreatedWhileRunning(claim, r.x.expect.started(r.x.clock())) {
		return nil, nil // it acquired nothing for the claim: none exists
	}
	list = &agentsv1beta1.SandboxList{}
	if err := r.x.reader.List(ctx, list, client.InNamespace(claim.Namespace), client.MatchingLabels{extv1beta1.SandboxIDLabel: string(claim.UID)}); err != nil {
		return nil, fmt.Errorf("looking up the Sandbox of claim %q: %w", claim.Name, err)
	}
	return render.ClaimedSandbox(claim, list.Items), nil
}

// named reads the Sandbox of the claim's name that render.ClaimNameToRead asks for (nil if
// none). A claim about to get a Sandbox (cached) reads the cache, which holds every Sandbox made
// before this process's first pass, and the API server when the cache has none and the claim is
// younger than that pass: a GitOps tool applies a claim and its rendered Sandbox together, and
// their watch events arrive on separate streams, so the claim may be seen first; reading past the
// cache then is what keeps the claim from adopting a warm member beside its own Sandbox. An
// expired claim's cleanup reads the API server only: the cache may still show the Sandbox it has
// just deleted.
func (r *ClaimReconciler) named(ctx context.Context, claim *extv1beta1.SandboxClaim, name string, cached bool) (*agentsv1beta1.Sandbox, error) {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: name}
	sb := &agentsv1beta1.Sandbox{}
	var err error
	switch {
	case !cached:
		err = r.x.reader.Get(ctx, key, sb)
	default:
		err = r.x.client.Get(ctx, key, sb)
		if apierrors.IsNotFound(err) && render.ClaimCreatedWhileRunning(claim, r.x.expect.started(r.x.clock())) {
			err = r.x.reader.Get(ctx, key, sb)
		}
	}
	switch {
	case err == nil:
		return sb, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading Sandbox %q for claim %q: %w", name, claim.Name, err)
}

// resolve reads the claim's pool and template from the cache (render.ResolveClaim decides,
// including v1alpha1's shadow-pool fallback to the template).
func (r *ClaimReconciler) resolve(ctx context.Context, claim *extv1beta1.SandboxClaim) render.ClaimPool {
	var pools []*extv1beta1.SandboxWarmPool
	pool := &extv1beta1.SandboxWarmPool{}
	if getCached(ctx, r.x.client, claim.Namespace, claim.Spec.WarmPoolRef.Name, pool) {
		pools = append(pools, pool)
	}
	// The pool, or v1alpha1's shadow pool, names the template.
	named := render.ResolveClaim(claim, pools, nil).Pool
	var templates []*extv1beta1.SandboxTemplate
	if named != nil {
		t := &extv1beta1.SandboxTemplate{}
		if getCached(ctx, r.x.client, claim.Namespace, named.Spec.TemplateRef.Name, t) {
			templates = append(templates, t)
		}
	}
	return render.ResolveClaim(claim, pools, templates)
}
