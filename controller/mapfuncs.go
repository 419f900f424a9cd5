package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// controllerOfKind maps an object to its controller of the given extensions kind.
func controllerOfKind(kind string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == kind && strings.HasPrefix(ref.APIVersion, extv1beta1.GroupVersion.Group+"/") {
			return request(o.GetNamespace(), ref.Name)
		}
		return nil
	}
}

// claimsOfPool maps a pool to the claims that draw from it and are not Ready yet (the ones a
// new or changed pool can help).
func claimsOfPool(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return claimRequests(ctx, c, o.GetNamespace(), o.GetName(), true)
	}
}

// claimsOfTemplate maps a template to the claims of its pools (and of v1alpha1's shadow pool):
// its metadata edits reach claimed Sandboxes, and its creation unblocks waiting claims.
func claimsOfTemplate(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		pools := &extv1beta1.SandboxWarmPoolList{}
		if err := c.List(ctx, pools, client.InNamespace(o.GetNamespace()), client.MatchingFields{templateRefIndex: o.GetName()}); err != nil {
			return nil
		}
		out := claimRequests(ctx, c, o.GetNamespace(), render.ShadowPoolName(o.GetName()), false)
		for _, p := range pools.Items {
			out = append(out, claimRequests(ctx, c, o.GetNamespace(), p.Name, false)...)
		}
		return out
	}
}

func claimRequests(ctx context.Context, c client.Reader, ns, pool string, unreadyOnly bool) []reconcile.Request {
	claims := &extv1beta1.SandboxClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(ns), client.MatchingFields{poolRefIndex: pool}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		cl := &claims.Items[i]
		if unreadyOnly && meta.IsStatusConditionTrue(cl.Status.Conditions, agentsv1beta1.ConditionReady) {
			continue
		}
		out = append(out, request(cl.Namespace, cl.Name)...)
	}
	return out
}

// poolOfMember maps a Sandbox to the pool that controls it, or, for an orphan with a warm-pool
// label, to the pool whose name hashes to it.
func poolOfMember(c client.Reader) handler.MapFunc {
	byRef := controllerOfKind(extv1beta1.SandboxWarmPoolKind)
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		if metav1.GetControllerOfNoCopy(o) != nil {
			return byRef(ctx, o)
		}
		hash := o.GetLabels()[agentsv1beta1.SandboxWarmPoolLabel]
		if hash == "" {
			return nil
		}
		pools := &extv1beta1.SandboxWarmPoolList{}
		if err := c.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		for _, p := range pools.Items {
			if render.NameHash(p.Name) == hash {
				return request(p.Namespace, p.Name)
			}
		}
		return nil
	}
}

// poolsOfTemplate maps a template to the pools that use it.
func poolsOfTemplate(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		pools := &extv1beta1.SandboxWarmPoolList{}
		if err := c.List(ctx, pools, client.InNamespace(o.GetNamespace()), client.MatchingFields{templateRefIndex: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range pools.Items {
			out = append(out, request(p.Namespace, p.Name)...)
		}
		return out
	}
}

// sandboxOfChild maps a child event to its Sandbox: the controller reference when a Sandbox
// controls it, else the Sandbox whose child's name it has (a Pod or Service named after the
// Sandbox, the standalone NetworkPolicy), so an unowned earlier render is adopted promptly too.
func sandboxOfChild(_ context.Context, o client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		if ref.Kind == agentsv1beta1.SandboxKind && strings.HasPrefix(ref.APIVersion, agentsv1beta1.GroupVersion.Group+"/") {
			return request(o.GetNamespace(), ref.Name)
		}
		return nil
	}
	switch o.(type) {
	case *corev1.Pod, *corev1.Service:
		return request(o.GetNamespace(), o.GetName())
	case *networkingv1.NetworkPolicy:
		if name, ok := render.StandaloneNetworkPolicyOf(o.GetName()); ok {
			return request(o.GetNamespace(), name)
		}
	}
	return nil
}

// templateOfPolicy maps a NetworkPolicy event to the template it belongs to.
func templateOfPolicy(_ context.Context, o client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		if ref.Kind == extv1beta1.SandboxTemplateKind {
			return request(o.GetNamespace(), ref.Name)
		}
		return nil
	}
	if name, ok := render.NetworkPolicyOf(o.GetName()); ok {
		return request(o.GetNamespace(), name)
	}
	return nil
}

func request(ns, name string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
