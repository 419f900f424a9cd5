package controller

import (
	"context"
	"fmt"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch

// TemplateReconciler keeps each SandboxTemplate's NetworkPolicy as render.TemplateStep decides:
// the secure default or the template's rules while Managed, none while Unmanaged. It writes
// nothing into the template itself (upstream's self-label is a deliberate deviation).
type TemplateReconciler struct {
	Client client.Client
	// APIReader reads from the API server (see applier.reader).
	APIReader client.Reader
	Events    *eventSink
	applies   *applyTransport
	configs   *renderConfigs
	// conflicts holds, per template, the conflict last reported in an event: the backoff
	// retries of the same conflict are not reported again.
	conflicts sync.Map
}

// Reconcile runs one pass over a template: read, decide, apply or prune.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			r.conflicts.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		r.conflicts.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	opts, inForce, err := r.configs.options(ctx, req.Namespace)
	if err != nil || !inForce {
		return ctrl.Result{}, err
	}
	var have *networkingv1.NetworkPolicy
	np := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: render.NetworkPolicyName(t.Name)}, np); err == nil {
		have = np
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}

	step, err := render.TemplateStep(t, have, opts)
	if err != nil {
		// Someone else's policy: report it once and retry with backoff, as upstream does.
		if last, ok := r.conflicts.Load(req.NamespacedName); !ok || last != err.Error() {
			r.Events.warning(t, "NetworkPolicyConflict", err.Error())
			r.conflicts.Store(req.NamespacedName, err.Error())
		}
		return ctrl.Result{}, err
	}
	r.conflicts.Delete(req.NamespacedName)
	if step == nil {
		return ctrl.Result{}, nil
	}
	a := applier{client: r.Client, reader: r.APIReader, applies: r.applies}
	var outcome Outcome
	if step.Action == render.ActionDelete {
		outcome, err = a.delete(ctx, have)
	} else {
		var live client.Object
		if have != nil {
			live = have
		}
		outcome, err = a.apply(ctx, step.Intent, live)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("SandboxTemplate %s/%s: %w", t.Namespace, t.Name, err)
	}
	if outcome != Unchanged {
		r.Events.applied(t, []done{{step: *step, outcome: outcome}})
	}
	return ctrl.Result{}, nil
}
