package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Options configure the controller: the render options the function has, and workers per kind.
type Options struct {
	Render render.Options
	// SandboxWorkers and TemplateWorkers are the concurrent reconciles per kind (upstream: 100
	// and 1). Zero means those defaults.
	SandboxWorkers, TemplateWorkers int
	// Namespaces limits the controller to these namespaces; empty means all.
	Namespaces []string
}

// nameHashIndex indexes cached Pods by their sandbox-name-hash label, so finding a Sandbox's
// Pods costs a map lookup rather than a scan of the namespace.
const nameHashIndex = "sandboxNameHash"

// CacheOptions keeps the cache small: only Pods, Services and PVCs that carry the
// sandbox-name-hash label (the children the render makes), and of every child's managedFields
// only this controller's own entries, which is all the applier reads. Of a Pod only the part a
// pass reads is cached (render.ObservedPod: no spec but its node, no container statuses): its
// spec is never updated. Sandboxes and templates are cached without managedFields.
func CacheOptions(opts Options) cache.Options {
	labelled, _ := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	// Reads hand out the cached objects themselves, not copies: the reconcilers never modify
	// what they read (render is pure; writes go from copies), and a copy of every Pod on every
	// pass was most of the controller's allocations.
	shared := ptr.To(true)
	children := cache.ByObject{Label: labels.NewSelector().Add(*labelled), Transform: keepOwnManagedFields, UnsafeDisableDeepCopy: shared}
	pods := children
	pods.Transform = observedPod
	var namespaces map[string]cache.Config
	if len(opts.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   pods,
			&corev1.Service{}:               children,
			&corev1.PersistentVolumeClaim{}: children,
			// Template policies carry no labels, so every NetworkPolicy is cached (few exist).
			&networkingv1.NetworkPolicy{}: {Transform: keepOwnManagedFields, UnsafeDisableDeepCopy: shared},
			&agentsv1beta1.Sandbox{}:      {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxTemplate{}: {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
		},
	}
}

// observedPod is the cache's transform of Pods: the part render.ObservedPod keeps, with only
// this controller's managedFields.
func observedPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil // a tombstone: its object was transformed when it was cached
	}
	if _, err := keepOwnManagedFields(pod); err != nil {
		return nil, err
	}
	return render.ObservedPod(pod), nil
}

func keepOwnManagedFields(in any) (any, error) {
	obj, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	var own []metav1.ManagedFieldsEntry
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager {
			own = append(own, e)
		}
	}
	obj.SetManagedFields(own)
	return in, nil
}

// Setup registers the Sandbox and SandboxTemplate reconcilers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, nameHashIndex, func(o client.Object) []string {
		if v := o.GetLabels()[agentsv1beta1.SandboxNameHashLabel]; v != "" {
			return []string{v}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Pods: %w", err)
	}
	events := newEventSink(mgr.GetEventRecorder("sandbox-gitops"))
	workers := func(n, def int) int {
		if n > 0 {
			return n
		}
		return def
	}

	applies := newApplyTransport(mgr)
	sandboxes := &SandboxReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: events, Render: opts.Render, applies: applies}
	toSandbox := handler.EnqueueRequestsFromMapFunc(sandboxOfChild)
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox").
		For(&agentsv1beta1.Sandbox{}).
		WithLogConstructor(reconcileLogs(mgr.GetLogger(), "sandbox", agentsv1beta1.GroupVersion.Group, agentsv1beta1.SandboxKind)).
		Watches(&corev1.Pod{}, toSandbox).
		Watches(&corev1.Service{}, toSandbox).
		Watches(&corev1.PersistentVolumeClaim{}, toSandbox).
		Watches(&networkingv1.NetworkPolicy{}, toSandbox).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers(opts.SandboxWorkers, 100)}).
		Complete(sandboxes); err != nil {
		return fmt.Errorf("setting up the Sandbox controller: %w", err)
	}

	templates := &TemplateReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: events, Render: opts.Render, applies: applies}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("sandboxtemplate").
		For(&extv1beta1.SandboxTemplate{}).
		WithLogConstructor(reconcileLogs(mgr.GetLogger(), "sandboxtemplate", extv1beta1.GroupVersion.Group, extv1beta1.SandboxTemplateKind)).
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(templateOfPolicy)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers(opts.TemplateWorkers, 1)}).
		Complete(templates); err != nil {
		return fmt.Errorf("setting up the SandboxTemplate controller: %w", err)
	}
	return nil
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
		name, ok := strings.CutPrefix(o.GetName(), "sandbox-")
		if name, ok2 := strings.CutSuffix(name, "-network-policy"); ok && ok2 {
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
	if name, ok := strings.CutSuffix(o.GetName(), "-network-policy"); ok {
		return request(o.GetNamespace(), name)
	}
	return nil
}

func request(ns, name string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
