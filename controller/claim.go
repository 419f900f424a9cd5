package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;delete;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;patch;delete

// Indexes of the cached Sandboxes.
const (
	// claimUIDIndex finds a claim's Sandbox by its claim-uid label.
	claimUIDIndex = "claimUID"
	// warmPoolIndex finds a pool's members by their warm-pool label (the pool name's hash).
	warmPoolIndex = "warmPool"
	// poolRefIndex finds the claims of a pool.
	poolRefIndex = "warmPoolRef"
	// templateRefIndex finds the pools of a template.
	templateRefIndex = "templateRef"
)

// missingDependencyRecheck is the safety net for a claim waiting on a pool or template that does
// not exist; their creation wakes the claim through a watch well before it.
const missingDependencyRecheck = time.Minute

// ClaimReconciler gives each SandboxClaim one Sandbox: the one it already has, else a Ready (or
// networked) member of its warm pool adopted under a resourceVersion lock, else a cold Sandbox
// made by render.ClaimSandbox. It re-syncs claimed Sandboxes' metadata, enforces the claim's
// lifecycle and writes its status. Every decision is render's; this only reads and writes.
type ClaimReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Events    *eventSink
	Now       func() time.Time
	configs   *renderConfigs
	// upstream are the annotations of upstream's to write (render.ClaimUpstreamAnnotations).
	upstream render.UpstreamAnnotations
	// annotated are the upstream annotations applied that the cache may not show yet.
	annotated annotated
	// statusFrom remembers, per claim, the resourceVersion its last status write started from:
	// a pass that still reads that version from the cache has not seen the write yet, and the
	// write's own watch event brings the pass that has.
	statusFrom sync.Map
	// adoptedFrom remembers, per adopted member, the resourceVersion the adoption was applied
	// on: while the cache still shows that version, the member is not offered to other claims
	// (it would only meet a 409; the resourceVersion lock stays what decides).
	adoptedFrom sync.Map
	// adopting holds the members an adoption of this process is in flight on, so that two
	// workers do not send two adoptions of which one can only fail.
	adopting sync.Map
	// claimed remembers the Sandbox this process acquired for each claim (by claim name, with
	// the claim's UID), for the passes that run before the cache shows it; an entry goes once
	// the cache shows the Sandbox, or the claim or the Sandbox is gone.
	claimed sync.Map
	// ready keeps the claim Ready histogram to each claim's first Ready.
	ready firstReady
	// leading is when this process started reconciling claims (it won the leader election): a
	// claim created after it can only have a Sandbox this process made.
	leading atomic.Pointer[time.Time]
}

// acquired is the Sandbox this process created or adopted for a claim (of that UID: a claim
// deleted and made again under its name is another).
type acquired struct {
	claim   types.UID
	sandbox string
}

// forget drops what this process remembers of a claim that is gone.
func (r *ClaimReconciler) forget(key types.NamespacedName) {
	r.statusFrom.Delete(key)
	r.claimed.Delete(key)
	r.ready.forget(key)
	r.annotated.forget(key)
}

// Start records when claims start being reconciled; the manager runs it once this replica
// leads.
func (r *ClaimReconciler) Start(ctx context.Context) error {
	now := r.now()
	r.leading.Store(&now)
	<-ctx.Done()
	return nil
}

// Reconcile runs one pass over a claim: read, expire, find or adopt or create, re-sync, status.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &extv1beta1.SandboxClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		// Its Sandbox goes with it through the owner reference.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		r.ready.first(req.NamespacedName, claim.UID) // Ready before this pass: not a first Ready of ours to count
	}
	now := r.now()
	sb, err := r.claimedSandbox(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}

	exp := render.ClaimExpiry(claim, now)
	switch exp.Step {
	case render.MarkExpired:
		st := render.ClaimStatus(claim, render.ClaimObservation{Sandbox: sb, Expired: true}, metav1.NewTime(now))
		if err := r.writeStatus(ctx, claim, &st, ""); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: exp.RequeueAfter.Duration}, nil
	case render.CleanUp:
		return ctrl.Result{}, r.cleanUp(ctx, claim, sb, exp.Action, now)
	}

	// Expiry above is the claim's lifecycle, whatever the config; what it is given is rendered.
	opts, inForce, err := r.configs.options(ctx, req.Namespace)
	if err != nil || !inForce {
		return ctrl.Result{}, err
	}
	cp := r.resolve(ctx, claim)
	var cerr *render.ClaimError
	launch := ""
	if sb != nil {
		sb, cerr, err = r.resync(ctx, claim, sb, cp.Template)
	} else {
		var wait time.Duration
		sb, launch, wait, cerr, err = r.acquire(ctx, claim, cp, now, opts)
		if wait > 0 {
			// A member is about to get its pod IP: look again shortly, write nothing yet.
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	st := render.ClaimStatus(claim, render.ClaimObservation{Sandbox: sb, Err: cerr}, metav1.NewTime(now))
	result := ctrl.Result{RequeueAfter: exp.RequeueAfter.Duration}
	if cerr != nil && cerr.Retried() {
		// A missing pool or template wakes the claim through a watch when it appears; this is
		// the safety net, slow enough not to be a hot loop.
		result.RequeueAfter = minPositive(result.RequeueAfter, missingDependencyRecheck)
	}
	// Upstream's annotations, when asked for, go after the status: off the critical path.
	annotate := func() error {
		if !r.upstream.Enabled {
			return nil
		}
		seen := *claim // what the claim holds, as far as this controller knows
		seen.Annotations = r.annotated.view(req.NamespacedName, claim.UID, claim.Annotations)
		ann := render.ClaimUpstreamAnnotations(&seen, sb, &st, now, r.upstream)
		if ann == nil {
			return nil
		}
		if err := applyAnnotations(ctx, r.Client, extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind), claim.Namespace, claim.Name, ann); err != nil {
			return err
		}
		r.annotated.store(req.NamespacedName, claim.UID, ann)
		return nil
	}
	if hold := render.ClaimStatusHold(claim, &st, now); hold > 0 && render.ClaimStatusNeedsWrite(&claim.Status, &st) {
		result.RequeueAfter = minPositive(result.RequeueAfter, hold)
		return result, annotate()
	}
	if err := r.writeStatus(ctx, claim, &st, launchTypeOf(sb, launch)); err != nil {
		return ctrl.Result{}, err
	}
	if err := annotate(); err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("claim pass", "took", time.Since(now).String(), "launch", launch)
	return result, nil
}

func (r *ClaimReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// claimedSandbox finds the Sandbox a claim controls: from the cache by its claim-uid label, and
// when the cache has none, from the API server, so a pass never adopts or creates a second
// Sandbox because the cache has not yet seen the first.
func (r *ClaimReconciler) claimedSandbox(ctx context.Context, claim *extv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	list := &agentsv1beta1.SandboxList{}
	if err := r.Client.List(ctx, list, client.InNamespace(claim.Namespace), client.MatchingFields{claimUIDIndex: string(claim.UID)}); err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(claim)
	if sb := controlledBy(list.Items, claim); sb != nil {
		r.claimed.Delete(key) // the cache has it now
		return sb, nil
	}
	if v, ok := r.claimed.Load(key); ok && v.(acquired).claim == claim.UID {
		// Ours, not in the cache yet.
		sb := &agentsv1beta1.Sandbox{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: v.(acquired).sandbox}, sb)
		if err == nil && metav1.IsControlledBy(sb, claim) && sb.DeletionTimestamp == nil {
			return sb, nil
		}
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		r.claimed.Delete(key)
	}
	if since := r.leading.Load(); since != nil && claim.CreationTimestamp.Time.After(since.Truncate(time.Second)) {
		// Created while this process leads, and it acquired nothing for it: no Sandbox exists.
		return nil, nil
	}
	list = &agentsv1beta1.SandboxList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(claim.Namespace), client.MatchingLabels{extv1beta1.SandboxIDLabel: string(claim.UID)}); err != nil {
		return nil, fmt.Errorf("looking up the Sandbox of claim %q: %w", claim.Name, err)
	}
	return controlledBy(list.Items, claim), nil
}

func controlledBy(items []agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	for i := range items {
		if ref := metav1.GetControllerOfNoCopy(&items[i]); ref != nil && ref.UID == claim.UID && items[i].DeletionTimestamp == nil {
			return &items[i]
		}
	}
	return nil
}

// resolve reads the claim's pool and template from the cache (render.ResolveClaim decides,
// including v1alpha1's shadow-pool fallback to the template).
func (r *ClaimReconciler) resolve(ctx context.Context, claim *extv1beta1.SandboxClaim) render.ClaimPool {
	var pools []*extv1beta1.SandboxWarmPool
	pool := &extv1beta1.SandboxWarmPool{}
	if r.getCached(ctx, claim.Namespace, claim.Spec.WarmPoolRef.Name, pool) {
		pools = append(pools, pool)
	}
	// The pool, or v1alpha1's shadow pool, names the template.
	named := render.ResolveClaim(claim, pools, nil).Pool
	var templates []*extv1beta1.SandboxTemplate
	if named != nil {
		t := &extv1beta1.SandboxTemplate{}
		if r.getCached(ctx, claim.Namespace, named.Spec.TemplateRef.Name, t) {
			templates = append(templates, t)
		}
	}
	return render.ResolveClaim(claim, pools, templates)
}

func (r *ClaimReconciler) getCached(ctx context.Context, ns, name string, obj client.Object) bool {
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "reading from the cache", "name", name)
	}
	return err == nil
}

// acquire gives a claim without a Sandbox its Sandbox: a warm member when the claim may have
// one, else a cold one. A positive wait means a member is about to become adoptable.
func (r *ClaimReconciler) acquire(ctx context.Context, claim *extv1beta1.SandboxClaim, cp render.ClaimPool, now time.Time, opts render.Options) (sb *agentsv1beta1.Sandbox, launch string, wait time.Duration, cerr *render.ClaimError, err error) {
	cold, cerr := render.ClaimSandbox(claim, cp, opts)
	if render.ClaimTriesWarm(claim, cp, cerr) {
		members := &agentsv1beta1.SandboxList{}
		if err := r.Client.List(ctx, members, client.InNamespace(claim.Namespace), client.MatchingFields{warmPoolIndex: render.NameHash(cp.Pool.Name)}); err != nil {
			return nil, "", 0, nil, err
		}
		claims := &extv1beta1.SandboxClaimList{}
		if err := r.Client.List(ctx, claims, client.InNamespace(claim.Namespace), client.MatchingFields{poolRefIndex: cp.Pool.Name}); err != nil {
			return nil, "", 0, nil, err
		}
		rank := render.ClaimRank(claim, notYetSeen(&r.statusFrom, pointers(claims.Items)))
		cands := render.ClaimWarmCandidates(claim, cp, notYetSeen(&r.adoptedFrom, pointers(members.Items)), rank, opts)
		for _, c := range cands.Adoptable {
			adopted, cerr, err := r.adopt(ctx, claim, c, cp)
			if err != nil || cerr != nil {
				return nil, "", 0, cerr, err
			}
			if adopted != nil {
				return adopted, agentsv1beta1.SandboxLaunchTypeWarm, 0, nil, nil
			}
		}
		if wait := render.ClaimWarmWait(claim, cands, now); wait > 0 {
			return nil, "", wait, nil, nil
		}
	}
	if cerr != nil {
		return nil, "", 0, cerr, nil
	}
	sb, cerr, err = r.createCold(ctx, claim, cold)
	return sb, agentsv1beta1.SandboxLaunchTypeCold, 0, cerr, err
}

// adopt takes one pool member for the claim: render.AdoptWarmSandbox's object applied on the
// member's resourceVersion. A 409 means the member changed since it was read: it is read again
// from the API server and tried again if it is still in the pool, else skipped (nil, nil).
func (r *ClaimReconciler) adopt(ctx context.Context, claim *extv1beta1.SandboxClaim, member *agentsv1beta1.Sandbox, cp render.ClaimPool) (*agentsv1beta1.Sandbox, *render.ClaimError, error) {
	key := client.ObjectKeyFromObject(member)
	if holder, busy := r.adopting.LoadOrStore(key, claim.UID); busy && holder != claim.UID {
		return nil, nil, nil
	}
	defer r.adopting.Delete(key)
	for attempt := 0; attempt < 3; attempt++ {
		intent, cerr := render.AdoptWarmSandbox(member, claim, cp.Template)
		if cerr != nil {
			return nil, cerr, nil
		}
		adopted, err := applySandbox(ctx, r.Client, intent, member.ResourceVersion)
		switch {
		case err == nil:
			r.adoptedFrom.Store(key, member.ResourceVersion)
			r.claimed.Store(client.ObjectKeyFromObject(claim), acquired{claim.UID, adopted.Name})
			r.Events.normal(claim, "SandboxAdopted", fmt.Sprintf("Adopted warm pool Sandbox %q", adopted.Name))
			return adopted, nil, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			log.FromContext(ctx).V(1).Info("adoption lost a race; reading the member again", "sandbox", member.Name, "error", err.Error())
		default:
			return nil, nil, err
		}
		fresh := &agentsv1beta1.Sandbox{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(member), fresh); err != nil {
			return nil, nil, client.IgnoreNotFound(err)
		}
		if !render.Adoptable(fresh, claim.Namespace, cp.Pool.Name) {
			return nil, nil, nil
		}
		member = fresh
	}
	return nil, nil, nil
}

// notYetSeen leaves out the objects whose cached version is the one a write of ours started
// from (the cache has not caught up with it yet), and forgets the entries the cache has caught
// up with.
func notYetSeen[T client.Object](from *sync.Map, objs []T) []T {
	out := objs[:0:0]
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		if rv, ok := from.Load(key); ok {
			if rv == o.GetResourceVersion() {
				continue
			}
			from.CompareAndDelete(key, rv)
		}
		out = append(out, o)
	}
	return out
}

// createCold creates the claim's own Sandbox, or applies over an existing one of its name only
// when render.ClaimCanTakeOver says so. The create goes first, create-only: the common case sends
// nothing else, and only a refused create reads what holds the name.
func (r *ClaimReconciler) createCold(ctx context.Context, claim *extv1beta1.SandboxClaim, intent *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, *render.ClaimError, error) {
	sb, err := applySandbox(ctx, r.Client, intent, createOnly)
	if apierrors.IsConflict(err) {
		existing := &agentsv1beta1.Sandbox{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: intent.Name}, existing); err != nil {
			// Gone again meanwhile: the next pass creates it.
			return nil, nil, err
		}
		if !render.ClaimCanTakeOver(existing) {
			return nil, render.ClaimNotControlledError(claim), nil
		}
		sb, err = applySandbox(ctx, r.Client, intent, existing.ResourceVersion)
	}
	if err != nil {
		return nil, nil, err
	}
	r.claimed.Store(client.ObjectKeyFromObject(claim), acquired{claim.UID, sb.Name})
	r.Events.normal(claim, "SandboxProvisioned", fmt.Sprintf("Created Sandbox %q", sb.Name))
	return sb, nil, nil
}

// resync keeps a claimed Sandbox's metadata as render.ClaimSandboxMetadata computes it from the
// current template (template metadata edits reach claimed Sandboxes; spec edits never do).
func (r *ClaimReconciler) resync(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, t *extv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, *render.ClaimError, error) {
	want, cerr := render.ClaimSandboxMetadata(sb, claim, t)
	if cerr != nil {
		return sb, cerr, nil
	}
	if equality.Semantic.DeepEqual(want.Labels, sb.Labels) && equality.Semantic.DeepEqual(want.Spec.PodTemplate.ObjectMeta, sb.Spec.PodTemplate.ObjectMeta) {
		return sb, nil, nil
	}
	synced, err := applySandbox(ctx, r.Client, want, sb.ResourceVersion)
	if apierrors.IsConflict(err) {
		// It changed meanwhile; its watch event brings the next pass.
		return sb, nil, nil
	}
	if err != nil {
		return sb, nil, err
	}
	return synced, nil, nil
}

// cleanUp carries out an expired claim's shutdown policy.
func (r *ClaimReconciler) cleanUp(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, action render.ClaimAction, now time.Time) error {
	switch action {
	case render.ClaimDelete, render.ClaimDeleteForeground:
		policy := metav1.DeletePropagationBackground
		if action == render.ClaimDeleteForeground {
			policy = metav1.DeletePropagationForeground
		}
		uid := claim.UID
		err := r.Client.Delete(ctx, claim.DeepCopy(), client.PropagationPolicy(policy), client.Preconditions{UID: &uid})
		return client.IgnoreNotFound(err)
	}
	// Retain: the Sandbox goes, the claim stays, marked expired.
	if sb == nil {
		other := &agentsv1beta1.Sandbox{}
		name := claim.Status.SandboxStatus.Name
		if name == "" {
			name = claim.Name
		}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, other); err == nil {
			st := render.ClaimStatus(claim, render.ClaimObservation{Expired: true, Err: render.ClaimNotOwnedError(name, claim.Name)}, metav1.NewTime(now))
			return r.writeStatus(ctx, claim, &st, "")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	} else {
		if _, err := (applier{client: r.Client}).delete(ctx, sb); err != nil {
			return err
		}
	}
	st := render.ClaimStatus(claim, render.ClaimObservation{Expired: true}, metav1.NewTime(now))
	return r.writeStatus(ctx, claim, &st, "")
}

// writeStatus writes a claim's status through the status subresource when it changed, as a
// JSON merge patch with the claim's resourceVersion (a 409 is dropped: the claim's own watch
// event brings the next pass). launch labels the latency metric on the first Ready.
func (r *ClaimReconciler) writeStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, next *extv1beta1.SandboxClaimStatus, launch string) error {
	if !render.ClaimStatusNeedsWrite(&claim.Status, next) {
		return nil
	}
	key := client.ObjectKeyFromObject(claim)
	if from, ok := r.statusFrom.Load(key); ok && from == claim.ResourceVersion {
		// The cache has not seen our last write; its watch event brings the next pass. Writing
		// now would only meet a 409.
		return nil
	}
	updated := claim.DeepCopy()
	updated.Status = *next
	err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(claim, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the status of SandboxClaim %q: %w", claim.Name, err)
	}
	r.statusFrom.Store(key, claim.ResourceVersion)
	wasReady := meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady)
	if !wasReady && meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) && r.ready.first(key, claim.UID) {
		observeClaimReady(launch, r.now().Sub(claim.CreationTimestamp.Time))
	}
	if c := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		old := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady)
		if c.Reason == extv1beta1.ClaimExpiredReason && (old == nil || old.Reason != c.Reason) {
			// Upstream's event of the first expired pass, once: when the status saying so is
			// written, not on passes whose write the cache had not seen or that met a 409.
			r.Events.normal(claim, extv1beta1.ClaimExpiredReason, render.ClaimExpiredMessage)
		}
		if c.Reason != render.ReasonSandboxNotReady && c.Reason != extv1beta1.ClaimExpiredReason && (old == nil || old.Message != c.Message) {
			r.Events.warning(claim, c.Reason, c.Message)
		}
	}
	return nil
}

// launchTypeOf is how the claim's Sandbox was launched, for the latency metric.
func launchTypeOf(sb *agentsv1beta1.Sandbox, launch string) string {
	if launch != "" {
		return launch
	}
	if sb != nil {
		return sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel]
	}
	return ""
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}
