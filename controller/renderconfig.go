package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// +kubebuilder:rbac:groups=render.sandbox-gitops.dev,resources=sandboxrenders,verbs=get;list;watch
// +kubebuilder:rbac:groups=render.sandbox-gitops.dev,resources=sandboxrenders/status,verbs=get;patch

// renderConfigs gives each namespace its render options: the namespace's SandboxRender, applied
// with its tree, else the controller's default (Options.Render: --render-config). Which one is
// in force is renderconfig.Resolve's decision; this only reads the cache and remembers the last
// resolution per namespace, so a pass costs a list of a handful of cached objects, not a parse.
type renderConfigs struct {
	reader   client.Reader
	fallback render.Options
	// upstream are the controller's switches for upstream's annotations, given to every
	// namespace's options (no render config sets them).
	upstream render.UpstreamAnnotations

	mu   sync.Mutex
	memo map[string]resolved
}

type resolved struct {
	key string // the names and generations it was resolved from
	res renderconfig.Resolution
}

func newRenderConfigs(reader client.Reader, fallback render.Options, upstream render.UpstreamAnnotations) *renderConfigs {
	return &renderConfigs{reader: reader, fallback: fallback, upstream: upstream, memo: map[string]resolved{}}
}

// resolve is the resolution of namespace ns from the SandboxRenders the cache holds.
func (c *renderConfigs) resolve(ctx context.Context, ns string) (renderconfig.Resolution, []renderv1alpha1.SandboxRender, error) {
	list := &renderv1alpha1.SandboxRenderList{}
	if err := c.reader.List(ctx, list, client.InNamespace(ns)); err != nil {
		return renderconfig.Resolution{}, nil, fmt.Errorf("listing the SandboxRenders of namespace %q: %w", ns, err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b renderv1alpha1.SandboxRender) int { return strings.Compare(a.Name, b.Name) })
	var key strings.Builder
	for _, o := range items {
		key.WriteString(o.Name + "/" + string(o.UID) + "/" + strconv.FormatInt(o.Generation, 10) + ";")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.memo[ns]; ok && m.key == key.String() {
		return m.res, items, nil
	}
	objs := make([]renderconfig.Object, len(items))
	for i, o := range items {
		objs[i] = renderconfig.Object{Name: o.Name, Generation: o.Generation, Spec: o.Spec.Raw}
	}
	res := renderconfig.Resolve(ns, objs, c.fallback)
	c.memo[ns] = resolved{key: key.String(), res: res}
	return res, items, nil
}

// options are the render options of namespace ns. ok is false when no config is in force there
// (two SandboxRenders, or an invalid one): the caller then leaves the namespace's objects as
// they are, with their last good render, and the config's status says why; fixing it brings a
// pass of every object it governs (governed).
func (c *renderConfigs) options(ctx context.Context, ns string) (opts render.Options, ok bool, err error) {
	res, _, err := c.resolve(ctx, ns)
	if err != nil {
		return render.Options{}, false, err
	}
	if res.Err != nil {
		logf.FromContext(ctx).V(1).Info("not rendered: no render config in force in the namespace", "reason", res.Err.Error())
		return render.Options{}, false, nil
	}
	opts = res.Options
	opts.Upstream = c.upstream
	return opts, true, nil
}

// governed maps a SandboxRender event to a pass of every object of one kind in its namespace:
// the objects it governs, and no other namespace's.
func governed(c client.Reader, list func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list()
		if err := c.List(ctx, l, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		_ = meta.EachListItem(l, func(item runtime.Object) error {
			if m, ok := item.(metav1.Object); ok {
				out = append(out, request(m.GetNamespace(), m.GetName())...)
			}
			return nil
		})
		return out
	}
}

// SandboxRenderReconciler writes each SandboxRender's status: whether it is the config in force
// in its namespace, at which generation, or why not, naming the field.
type SandboxRenderReconciler struct {
	Client  client.Client
	configs *renderConfigs
}

// SetupWithManager registers the reconciler: SandboxRenders, on a new generation.
func (r *SandboxRenderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sandboxrender").
		For(&renderv1alpha1.SandboxRender{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithLogConstructor(reconcileLogs(mgr.GetLogger(), "sandboxrender", renderv1alpha1.GroupVersion.Group, renderv1alpha1.SandboxRenderKind)).
		Complete(r)
}

// Reconcile resolves the namespace of the SandboxRender and writes the status of every
// SandboxRender there whose Ready condition the resolution changes (two conflicting objects
// both say so).
func (r *SandboxRenderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, items, err := r.configs.resolve(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range items {
		o := &items[i]
		want, ok := res.Ready[o.Name]
		if !ok || !o.DeletionTimestamp.IsZero() {
			continue
		}
		updated := o.DeepCopy()
		updated.Status.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&updated.Status.Conditions, want)
		if updated.Status.ObservedGeneration == o.Status.ObservedGeneration && sameConditions(updated.Status.Conditions, o.Status.Conditions) {
			continue
		}
		if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(o), client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, fmt.Errorf("writing the status of SandboxRender %q: %w", o.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// sameConditions: no status, reason, message or observed generation differs (meta's
// SetStatusCondition keeps the transition time of an unchanged status).
func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message && x.ObservedGeneration == y.ObservedGeneration
	})
}
