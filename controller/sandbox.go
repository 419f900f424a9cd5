package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
	x       *executor
	configs *renderConfigs
	workers int
}

// SetupWithManager registers the reconciler: Sandboxes, their children's events mapped to them,
// and the SandboxRenders that govern them.
func (r *SandboxReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toSandbox := handler.EnqueueRequestsFromMapFunc(r.x.deferToPass(agentsv1beta1.SandboxKind, sandboxOfChild))
	return controllerFor(mgr, r.x, "sandbox", &agentsv1beta1.Sandbox{}, agentsv1beta1.GroupVersion.Group, agentsv1beta1.SandboxKind, r.workers,
		func() client.ObjectList { return &agentsv1beta1.SandboxList{} }).
		Watches(&corev1.Pod{}, toSandbox).
		Watches(&corev1.Service{}, toSandbox).
		Watches(&corev1.PersistentVolumeClaim{}, toSandbox).
		Watches(&networkingv1.NetworkPolicy{}, toSandbox).
		Complete(r)
}

// Reconcile runs one pass over a Sandbox: observe, render.PlanSandbox, execute, status.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileWith(ctx, r.x, r.configs, req, &agentsv1beta1.Sandbox{}, r.observe, nil)
}

// sandboxPass is a Sandbox's pass: what was found, for render.PlanSandbox.
type sandboxPass struct {
	x     *executor
	sb    *agentsv1beta1.Sandbox
	found render.SandboxFound
	// children are the children found by "Kind/name", for the applier's owned-fields compare.
	children map[string]client.Object
	now      metav1.Time
	opts     render.Options
}

func (p *sandboxPass) plan() *render.SandboxPlan {
	return render.PlanSandbox(p.sb, p.found, p.now, p.opts)
}

func (p *sandboxPass) saw(s render.Step, obj client.Object) {
	if obj != nil {
		p.add(obj)
	}
}

func (p *sandboxPass) add(obj client.Object) {
	p.found.Saw(render.Step{}, obj)
	p.children[kindOf(obj)+"/"+obj.GetName()] = obj
}

func (p *sandboxPass) live(s render.Step) client.Object { return p.children[s.Kind+"/"+s.Name] }

func (p *sandboxPass) withStatus(st *agentsv1beta1.SandboxStatus) client.Object {
	u := p.sb.DeepCopy()
	u.Status = *st
	return u
}

func (p *sandboxPass) statusWritten(plan *render.SandboxPlan) {
	was := meta.IsStatusConditionTrue(p.sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if p.x.firstReady(p.sb, was, meta.IsStatusConditionTrue(plan.Status.Conditions, agentsv1beta1.ConditionReady)) {
		observeReady(p.x.clock().Sub(p.sb.CreationTimestamp.Time))
	}
}

// echoNeedsNoPass says whether the echo of this pass's status write needs no pass. The
// Sandbox's children it wrote each bring one with their own events (each is the Sandbox's:
// sandboxOfChild maps them back; one that comes while the echo is awaited is deferred to it,
// which then brings the pass). With none written, render decides on the Sandbox as the write
// left it, the API server's answer, which holds whatever else changed meanwhile
// (render.EchoNeedsNoPass).
func (p *sandboxPass) echoNeedsNoPass(plan *render.SandboxPlan, wrote []render.Step, updated client.Object) bool {
	sb, ok := updated.(*agentsv1beta1.Sandbox)
	if !ok {
		return false
	}
	if len(wrote) > 0 {
		// Unless the write found the Sandbox itself changed by someone since the pass read it.
		return sb.Generation == p.sb.Generation && maps.Equal(sb.Labels, p.sb.Labels) && maps.Equal(sb.Annotations, p.sb.Annotations)
	}
	next := *p
	next.sb = sb
	return render.EchoNeedsNoPass(&next.plan().Plan, plan.RequeueAfter.Duration)
}

// observe reads a Sandbox's children from the cache, and from the API server the Pod
// render.PodToReadByName names (the cache holds only labelled Pods, and no create of this pass
// would meet that one). Nothing is rendered without a render config in force.
func (r *SandboxReconciler) observe(ctx context.Context, sb *agentsv1beta1.Sandbox, pc *passContext) (kindPass[agentsv1beta1.SandboxStatus, *render.SandboxPlan], error) {
	if !pc.inForce {
		return nil, nil
	}
	p := &sandboxPass{x: r.x, sb: sb, children: map[string]client.Object{}, now: metav1.NewTime(pc.now), opts: pc.opts}
	c := r.x.client
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(sb.Namespace), client.MatchingFields{nameHashIndex: render.NameHash(sb.Name)}); err != nil {
		log.FromContext(ctx).Error(err, "listing the Sandbox's Pods")
		p.found.PodUnknown = true
	}
	for i := range pods.Items {
		p.add(&pods.Items[i])
	}
	named := map[string]client.Object{sb.Name: &corev1.Service{}, render.StandaloneNetworkPolicyName(sb.Name): &networkingv1.NetworkPolicy{}}
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		named[render.PVCName(vct.Name, sb.Name)] = &corev1.PersistentVolumeClaim{}
	}
	for name, obj := range named {
		if getCached(ctx, c, sb.Namespace, name, obj) {
			p.add(obj)
		}
	}
	for _, o := range p.children {
		r.x.expect.seen(keyOf(kindOf(o), sb.Namespace, o.GetName()), true)
	}
	p.found.Annotations = r.x.expect.annotations(keyOf(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name), sb.UID)
	if name, read := render.PodToReadByName(sb, p.found); read {
		pod := &corev1.Pod{}
		switch err := r.x.reader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, pod); {
		case err == nil:
			p.add(pod)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading Pod %q: %w", name, err)
		}
	}
	return p, nil
}
