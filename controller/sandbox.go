package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SandboxReconciler turns each Sandbox into its Pod, PVCs, Service (and the
// standalone-network-policy pack's NetworkPolicy) with the plan render.PlanSandbox makes.
type SandboxReconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: objects the cache does not show that a create found
	// (or may find) in the way, and an object a scoped intent is sent to (see applier.reader).
	APIReader client.Reader
	Events    *eventSink
	// Now is the clock; time.Now when nil. Time enters render only as this value.
	Now func() time.Time

	recent  recentCreates
	applies *applyTransport
	configs *renderConfigs
	// upstream are the annotations of upstream's to write (render.SandboxUpstreamAnnotations).
	upstream render.UpstreamAnnotations
	// annotated are the upstream annotations applied that the cache may not show yet.
	annotated annotated
	ready     firstReady
	// statusFrom remembers, per Sandbox, the resourceVersion its last status write started
	// from: a pass that still reads that version from the cache has not seen the write yet (a
	// backlogged cache under a burst), and the write's own watch event brings the pass that has.
	// Writing again would send the same status twice.
	statusFrom sync.Map
}

// Reconcile runs one pass over a Sandbox: read, plan, apply and prune, status.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sb); err != nil {
		if apierrors.IsNotFound(err) {
			r.ready.forget(req.NamespacedName)
			r.statusFrom.Delete(req.NamespacedName)
			r.annotated.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sb.DeletionTimestamp.IsZero() {
		// Children go with it through their owner references.
		r.ready.forget(req.NamespacedName)
		r.statusFrom.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
		r.ready.first(req.NamespacedName, sb.UID) // Ready before this pass: not a first Ready of ours to count
	}
	opts, inForce, err := r.configs.options(ctx, req.Namespace)
	if err != nil || !inForce {
		return ctrl.Result{}, err
	}
	now := metav1.NewTime(r.now())

	obs, live := r.observe(ctx, sb)
	if name, read := render.PodToReadByName(sb, obs); read {
		// The cache holds only labelled Pods, and no create of this pass would meet this one.
		pod := &corev1.Pod{}
		switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, pod); {
		case err == nil:
			addObserved(&obs, live, pod)
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("reading Pod %q: %w", name, err)
		}
	}
	plan := render.PlanSandbox(sb, obs, now, opts)
	if r.awaitingCache(sb, plan, now.Time) {
		// A child this pass would create was created a moment ago and its watch event, which
		// starts the next pass, has not reached the cache yet. Planning now would only read it
		// from the API server: at 1,000 Sandboxes created together, 874 reads of Services whose
		// event came after their Pod's. The requeue is the safety net should no event come.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	// Creates carry a precondition that refuses them if the object exists (see createOnly), so
	// only the children this controller created a moment ago, which the cache may not show
	// yet, are read from the API server first: re-sending their creates would be refused writes.
	plan, err = r.confirm(ctx, sb, plan, &obs, live, now, opts, func(key string) bool { return r.recent.has(key, now.Time) })
	if err != nil {
		return ctrl.Result{}, err
	}
	wrote, err := r.execute(ctx, sb, plan, live)
	if exists := (*existsError)(nil); errors.As(err, &exists) {
		// An object of a child's name exists that the cache does not show: someone else's (not
		// labelled), or one just made. Read every object the plan creates and plan again, once.
		if plan, err = r.confirm(ctx, sb, plan, &obs, live, now, opts, nil); err == nil {
			var more []done
			more, err = r.execute(ctx, sb, plan, live)
			wrote = append(wrote, more...)
		}
	}
	r.Events.applied(sb, wrote)
	if err != nil {
		if refusedByAPIServer(err) {
			// Admission, a quota or validation said no: retrying will not change that until
			// someone acts, so the Sandbox says why, as upstream's does for any error of a pass.
			if st := plan.FailedStatus(sb, err, now, opts); st != nil {
				if serr := r.writeStatus(ctx, sb, st); serr != nil {
					err = errors.Join(err, serr)
				}
			}
		}
		return ctrl.Result{}, err
	}

	// Upstream's pod-name, when asked for: once the Pod is observed, which is before it is Ready,
	// so not on the way to the Ready status.
	if r.upstream.Enabled {
		seen := *sb // what the Sandbox holds, as far as this controller knows
		seen.Annotations = r.annotated.view(req.NamespacedName, sb.UID, sb.Annotations)
		if ann := render.SandboxUpstreamAnnotations(&seen, obs, r.upstream); ann != nil {
			if err := applyAnnotations(ctx, r.Client, agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind), sb.Namespace, sb.Name, ann); err != nil {
				return ctrl.Result{}, err
			}
			r.annotated.store(req.NamespacedName, sb.UID, ann)
		}
	}
	result := ctrl.Result{RequeueAfter: plan.Expiry.RequeueAfter.Duration}
	if plan.Status == nil {
		return result, nil
	}
	if len(wrote) > 0 {
		// Our own writes come back as watch events and start the next pass, which computes the
		// status from the objects as the API server has them: one status write instead of two.
		// The requeue is only a safety net should no event come.
		if result.RequeueAfter == 0 || result.RequeueAfter > time.Second {
			result.RequeueAfter = time.Second
		}
		return result, nil
	}
	if hold := render.StatusHold(sb, plan.Pod, plan.Status, now.Time); hold > 0 && render.StatusNeedsWrite(&sb.Status, plan.Status) {
		// A normal start: its status waits for Ready or the end of the startup window.
		if result.RequeueAfter == 0 || result.RequeueAfter > hold {
			result.RequeueAfter = hold
		}
		return result, nil
	}
	if err := r.writeStatus(ctx, sb, plan.Status); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

func (r *SandboxReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// liveChildren are the observed objects by "Kind/name", for the applier's field extraction and
// for deletes.
type liveChildren map[string]client.Object

func key(kind, name string) string { return kind + "/" + name }

// observe reads a Sandbox's children from the cache.
func (r *SandboxReconciler) observe(ctx context.Context, sb *agentsv1beta1.Sandbox) (render.ObservedChildren, liveChildren) {
	var obs render.ObservedChildren
	live := liveChildren{}
	hash := render.NameHash(sb.Name)

	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(sb.Namespace), client.MatchingFields{nameHashIndex: hash}); err != nil {
		log.FromContext(ctx).Error(err, "listing the Sandbox's Pods")
		obs.PodUnknown = true
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		obs.Pods = append(obs.Pods, p)
		live[key("Pod", p.Name)] = p
		r.recent.seen(childKey(sb.Namespace, "Pod", p.Name))
	}

	svc := &corev1.Service{}
	if r.getCached(ctx, sb.Namespace, sb.Name, svc) {
		obs.Service = svc
		live[key("Service", svc.Name)] = svc
		r.recent.seen(childKey(sb.Namespace, "Service", svc.Name))
	}
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		pvc := &corev1.PersistentVolumeClaim{}
		if r.getCached(ctx, sb.Namespace, render.PVCName(vct.Name, sb.Name), pvc) {
			obs.PVCs = append(obs.PVCs, pvc)
			live[key("PersistentVolumeClaim", pvc.Name)] = pvc
			r.recent.seen(childKey(sb.Namespace, "PersistentVolumeClaim", pvc.Name))
		}
	}
	np := &networkingv1.NetworkPolicy{}
	if r.getCached(ctx, sb.Namespace, render.StandaloneNetworkPolicyName(sb.Name), np) {
		obs.NetworkPolicy = np
		live[key("NetworkPolicy", np.Name)] = np
		r.recent.seen(childKey(sb.Namespace, "NetworkPolicy", np.Name))
	}
	return obs, live
}

func (r *SandboxReconciler) getCached(ctx context.Context, ns, name string, obj client.Object) bool {
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "reading from the cache", "name", name)
	}
	return err == nil
}

// awaitingCache reports whether a create of the plan is of a child this controller created
// within cacheLag before now that the cache does not show yet.
func (r *SandboxReconciler) awaitingCache(sb *agentsv1beta1.Sandbox, plan *render.SandboxPlan, now time.Time) bool {
	for _, s := range plan.Steps {
		if s.Action == render.ActionCreate && r.recent.within(childKey(sb.Namespace, s.Kind, s.Name), now, cacheLag) {
			return true
		}
	}
	return false
}

// cacheLag is how long a child just created may take to reach the cache before a pass that
// plans to create it again reads it from the API server instead of waiting for its event (it
// may have been deleted before the cache saw it). A watch event normally takes milliseconds.
const cacheLag = 5 * time.Second

// confirm reads from the API server the objects the plan creates (those for which only says
// so, all when only is nil) and, if any exist, plans again with them. The cache holds only
// children that carry the name-hash label and lags behind writes.
func (r *SandboxReconciler) confirm(ctx context.Context, sb *agentsv1beta1.Sandbox, plan *render.SandboxPlan, obs *render.ObservedChildren, live liveChildren, now metav1.Time, opts render.Options, only func(key string) bool) (*render.SandboxPlan, error) {
	found := false
	for _, s := range plan.Steps {
		if s.Action != render.ActionCreate || (only != nil && !only(childKey(sb.Namespace, s.Kind, s.Name))) {
			continue
		}
		obj := newChild(s.Kind)
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: s.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading %s %q: %w", s.Kind, s.Name, err)
		default:
			addObserved(obs, live, obj)
			found = true
		}
	}
	if !found {
		return plan, nil
	}
	return render.PlanSandbox(sb, *obs, now, opts), nil
}

// recentCreates are the children this controller created that its cache may not show yet: a
// pass that plans to create one of them again reads it from the API server first rather than
// send a create the API server would refuse. A child leaves the set when the cache shows it, or
// after a minute.
type recentCreates struct {
	mu sync.Mutex
	at map[string]time.Time
}

const recentCreateWindow = time.Minute

func childKey(ns, kind, name string) string { return ns + "/" + kind + "/" + name }

func (c *recentCreates) add(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]time.Time{}
	}
	if len(c.at) >= 1024 && len(c.at)%1024 == 0 {
		// Children the cache never showed (deleted at once, their Sandbox gone) age out here.
		for k, t := range c.at {
			if now.Sub(t) > recentCreateWindow {
				delete(c.at, k)
			}
		}
	}
	c.at[key] = now
}

// has reports whether key was created within the window before now and not yet seen in the
// cache.
func (c *recentCreates) has(key string, now time.Time) bool {
	return c.within(key, now, recentCreateWindow)
}

// within reports whether key was created at most d before now and not yet seen in the cache.
func (c *recentCreates) within(key string, now time.Time, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[key]
	return ok && now.Sub(t) <= d
}

func (c *recentCreates) seen(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.at, key)
}

// addObserved adds an object read from the API server to what was observed.
func addObserved(obs *render.ObservedChildren, live liveChildren, obj client.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		obs.Pods = append(obs.Pods, o)
		live[key("Pod", o.Name)] = o
	case *corev1.Service:
		obs.Service = o
		live[key("Service", o.Name)] = o
	case *corev1.PersistentVolumeClaim:
		obs.PVCs = append(obs.PVCs, o)
		live[key("PersistentVolumeClaim", o.Name)] = o
	case *networkingv1.NetworkPolicy:
		obs.NetworkPolicy = o
		live[key("NetworkPolicy", o.Name)] = o
	}
}

// newChild is an empty object of a child kind named in a plan step.
func newChild(kind string) client.Object {
	switch kind {
	case "Pod":
		return &corev1.Pod{}
	case "Service":
		return &corev1.Service{}
	case "PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case agentsv1beta1.SandboxKind:
		return &agentsv1beta1.Sandbox{}
	}
	return nil
}

// execute carries out the plan's steps in order and returns the ones that wrote something. The
// first failure stops the pass (the next one starts from what the API server then has).
func (r *SandboxReconciler) execute(ctx context.Context, sb *agentsv1beta1.Sandbox, plan *render.SandboxPlan, live liveChildren) ([]done, error) {
	a := applier{client: r.Client, reader: r.APIReader, applies: r.applies}
	var out []done
	for _, s := range plan.Steps {
		var outcome Outcome
		var err error
		switch {
		case s.Action == render.ActionDelete && s.Kind == agentsv1beta1.SandboxKind:
			outcome, err = a.delete(ctx, sb)
		case s.Action == render.ActionDelete:
			obj := live[key(s.Kind, s.Name)]
			if obj == nil {
				continue
			}
			outcome, err = a.delete(ctx, obj)
		default:
			outcome, err = a.apply(ctx, s.Intent, live[key(s.Kind, s.Name)])
		}
		if err != nil {
			return out, err
		}
		if outcome == Created {
			r.recent.add(childKey(sb.Namespace, s.Kind, s.Name), r.now())
		}
		if outcome != Unchanged {
			out = append(out, done{step: s, outcome: outcome})
		}
	}
	return out, nil
}

// refusedByAPIServer tells a write the API server refused on its merits (admission webhooks and
// PodSecurity, quotas, validation) from one that failed on the way (a timeout, an unavailable
// server, a conflict), which the retry settles without anyone acting and which is not worth a
// status write of its own.
func refusedByAPIServer(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// done is a step that wrote something, and what it did.
type done struct {
	step    render.Step
	outcome Outcome
}

// writeStatus writes the status render computed through the status subresource, only when
// render says it changed. It is a JSON merge patch against the status read, as upstream's: the
// conditions list is replaced whole, so their order is the one render computed.
func (r *SandboxReconciler) writeStatus(ctx context.Context, sb *agentsv1beta1.Sandbox, next *agentsv1beta1.SandboxStatus) error {
	key := client.ObjectKeyFromObject(sb)
	if from, ok := r.statusFrom.Load(key); ok {
		if from == sb.ResourceVersion {
			return nil // the cache has not seen our last write yet
		}
		r.statusFrom.CompareAndDelete(key, from)
	}
	if !render.StatusNeedsWrite(&sb.Status, next) {
		return nil
	}
	updated := sb.DeepCopy()
	updated.Status = *next
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(sb), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("writing the status of Sandbox %q: %w", sb.Name, err)
	}
	r.statusFrom.Store(key, sb.ResourceVersion)
	wasReady := meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if !wasReady && meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) &&
		r.ready.first(client.ObjectKeyFromObject(sb), sb.UID) {
		observeReady(r.now().Sub(sb.CreationTimestamp.Time))
	}
	// An error, or upstream's MultiplePods refusal, is a Warning event when it first appears.
	if c := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady); c != nil &&
		(c.Reason == agentsv1beta1.ReasonReconcilerError || c.Reason == agentsv1beta1.ReasonMultiplePods) {
		old := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
		if old == nil || old.Message != c.Message {
			r.Events.warning(sb, c.Reason, c.Message)
		}
	}
	return nil
}
