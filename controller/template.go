package controller

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch

// TemplateReconciler keeps each SandboxTemplate's NetworkPolicy as render.PlanTemplate decides:
// the secure default or the template's rules while Managed, none while Unmanaged. It writes
// nothing into the template itself (upstream's self-label is a deliberate deviation).
type TemplateReconciler struct {
	x       *executor
	configs *renderConfigs
	workers int
}

// SetupWithManager registers the reconciler: templates, the NetworkPolicies they own or would
// own, and the SandboxRenders that govern them.
func (r *TemplateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return controllerFor(mgr, r.x, "sandboxtemplate", &extv1beta1.SandboxTemplate{}, extv1beta1.GroupVersion.Group, extv1beta1.SandboxTemplateKind, r.workers,
		func() client.ObjectList { return &extv1beta1.SandboxTemplateList{} }).
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(templateOfPolicy)).
		Complete(r)
}

// Reconcile runs one pass over a template: observe, render.PlanTemplate, execute.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileWith(ctx, r.x, r.configs, req, &extv1beta1.SandboxTemplate{}, r.observe, nil)
}

// observe reads the template's NetworkPolicy from the cache, and the refusal last reported on the
// template. Nothing is rendered without a render config in force.
func (r *TemplateReconciler) observe(ctx context.Context, t *extv1beta1.SandboxTemplate, pc *passContext) (kindPass[render.NoStatus, *render.TemplatePlan], error) {
	if !pc.inForce {
		return nil, nil
	}
	p := &templatePass{x: r.x, t: t, opts: pc.opts}
	p.found.Reported = r.x.expect.reportedOn(p.key())
	np := &networkingv1.NetworkPolicy{}
	if getCached(ctx, r.x.client, t.Namespace, render.NetworkPolicyName(t.Name), np) {
		p.found.NetworkPolicy = np
	}
	return p, nil
}

// templatePass is a template's pass: the NetworkPolicy found, for render.PlanTemplate.
type templatePass struct {
	x     *executor
	t     *extv1beta1.SandboxTemplate
	found render.TemplateFound
	opts  render.Options
}

func (p *templatePass) key() objectKey {
	return keyOf(extv1beta1.SandboxTemplateKind, p.t.Namespace, p.t.Name)
}

// plan plans the pass and remembers the refusal it reports (none once it no longer stands), so
// that the retries of the same refusal do not report it again.
func (p *templatePass) plan() *render.TemplatePlan {
	plan := render.PlanTemplate(p.t, p.found, p.opts)
	p.x.expect.report(p.key(), plan.Error)
	return plan
}

func (p *templatePass) saw(_ render.Step, obj client.Object) {
	p.found.NetworkPolicy, _ = obj.(*networkingv1.NetworkPolicy)
}

func (p *templatePass) live(render.Step) client.Object {
	if p.found.NetworkPolicy == nil {
		return nil
	}
	return p.found.NetworkPolicy
}

func (p *templatePass) withStatus(*render.NoStatus) client.Object { return p.t }

func (p *templatePass) statusWritten(*render.TemplatePlan) {}
