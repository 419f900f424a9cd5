package controller

import (
	"context"
	"fmt"
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
	// APIReader reads from the API server; used only to confirm that an object the cache does
	// not have is really absent before creating it, and to read an object a scoped intent is
	// sent to (see applier.reader).
	APIReader client.Reader
	Events    *eventSink
	Render    render.Options
	// Now is the clock; time.Now when nil. Time enters render only as this value.
	Now func() time.Time
}

// Reconcile runs one pass over a Sandbox: read, plan, confirm creates, apply and prune, status.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sb.DeletionTimestamp.IsZero() {
		// Children go with it through their owner references.
		return ctrl.Result{}, nil
	}
	now := metav1.NewTime(r.now())

	obs, live := r.observe(ctx, sb)
	plan := render.PlanSandbox(sb, obs, now, r.Render)
	if found, err := r.confirmAbsent(ctx, sb, plan); err != nil {
		return ctrl.Result{}, err
	} else if len(found) > 0 {
		// The cache had not seen objects that exist: plan again with them.
		for _, obj := range found {
			addObserved(&obs, live, obj)
		}
		plan = render.PlanSandbox(sb, obs, now, r.Render)
	}

	done, err := r.execute(ctx, sb, plan, live)
	r.Events.applied(sb, done)
	if err != nil {
		return ctrl.Result{}, err
	}

	result := ctrl.Result{RequeueAfter: plan.Expiry.RequeueAfter.Duration}
	if plan.Status == nil {
		return result, nil
	}
	if len(done) > 0 {
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
	}

	svc := &corev1.Service{}
	if r.getCached(ctx, sb.Namespace, sb.Name, svc) {
		obs.Service = svc
		live[key("Service", svc.Name)] = svc
	}
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		pvc := &corev1.PersistentVolumeClaim{}
		if r.getCached(ctx, sb.Namespace, render.PVCName(vct.Name, sb.Name), pvc) {
			obs.PVCs = append(obs.PVCs, pvc)
			live[key("PersistentVolumeClaim", pvc.Name)] = pvc
		}
	}
	np := &networkingv1.NetworkPolicy{}
	if r.getCached(ctx, sb.Namespace, render.StandaloneNetworkPolicyName(sb.Name), np) {
		obs.NetworkPolicy = np
		live[key("NetworkPolicy", np.Name)] = np
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

// confirmAbsent asks the API server for every object the plan creates. The cache only holds
// children that carry the name-hash label and can lag behind our own writes; creating over an
// object it does not show would take over someone else's object, or send a write that changes
// nothing. It returns the objects that do exist.
func (r *SandboxReconciler) confirmAbsent(ctx context.Context, sb *agentsv1beta1.Sandbox, plan *render.SandboxPlan) ([]client.Object, error) {
	var found []client.Object
	for _, s := range plan.Steps {
		if s.Action != render.ActionCreate {
			continue
		}
		obj := newChild(s.Kind)
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: s.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("confirming that %s %q does not exist: %w", s.Kind, s.Name, err)
		default:
			found = append(found, obj)
		}
	}
	return found, nil
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
	a := applier{client: r.Client, reader: r.APIReader}
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
		if outcome != Unchanged {
			out = append(out, done{step: s, outcome: outcome})
		}
	}
	return out, nil
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
	if !render.StatusNeedsWrite(&sb.Status, next) {
		return nil
	}
	updated := sb.DeepCopy()
	updated.Status = *next
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(sb)); err != nil {
		return fmt.Errorf("writing the status of Sandbox %q: %w", sb.Name, err)
	}
	wasReady := meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if !wasReady && meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) {
		observeReady(r.now().Sub(sb.CreationTimestamp.Time))
	}
	if c := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady); c != nil && c.Reason == agentsv1beta1.ReasonReconcilerError {
		old := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
		if old == nil || old.Message != c.Message {
			r.Events.warning(sb, c.Reason, c.Message)
		}
	}
	return nil
}
