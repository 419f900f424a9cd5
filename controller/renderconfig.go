package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// SandboxRenderReconciler writes each SandboxRender's status through the executor, under the
// plan contract of the other kinds: renderconfig.PlanStatus decides it from the namespace's
// resolution (whether it is the config in force, at which generation, or why not, naming the
// field). A change to any SandboxRender of a namespace (added, changed, deleted) brings a pass of
// each of them: one's arrival turns another's Ready False (two in one namespace), its deletion
// True again.
type SandboxRenderReconciler struct {
	x       *executor
	configs *renderConfigs
}

// SetupWithManager registers the reconciler: SandboxRenders, on a new generation, and the
// others of the namespace of one that changes.
func (r *SandboxRenderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	generation := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named("sandboxrender").
		For(&renderv1alpha1.SandboxRender{}, generation).
		Watches(&renderv1alpha1.SandboxRender{}, handler.EnqueueRequestsFromMapFunc(governed(mgr.GetClient(),
			func() client.ObjectList { return &renderv1alpha1.SandboxRenderList{} })), generation).
		WithLogConstructor(reconcileLogs(mgr.GetLogger(), "sandboxrender", renderv1alpha1.GroupVersion.Group, renderv1alpha1.SandboxRenderKind)).
		Complete(r)
}

// Reconcile runs one pass over a SandboxRender: resolve its namespace, renderconfig.PlanStatus,
// execute.
func (r *SandboxRenderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileWith(ctx, r.x, r.configs, req, &renderv1alpha1.SandboxRender{}, r.observe, nil)
}

// observe resolves the namespace from the SandboxRenders the cache holds.
func (r *SandboxRenderReconciler) observe(ctx context.Context, o *renderv1alpha1.SandboxRender, pc *passContext) (kindPass[renderv1alpha1.SandboxRenderStatus, *render.Plan[renderv1alpha1.SandboxRenderStatus]], error) {
	res, _, err := r.configs.resolve(ctx, o.Namespace)
	if err != nil {
		return nil, err
	}
	return &renderConfigPass{o: o, res: res, now: pc.now}, nil
}

// renderConfigPass is a SandboxRender's pass: its namespace's resolution, for
// renderconfig.PlanStatus. A SandboxRender has no children, so there are no steps to read back.
type renderConfigPass struct {
	o   *renderv1alpha1.SandboxRender
	res renderconfig.Resolution
	now time.Time
}

func (p *renderConfigPass) plan() *render.Plan[renderv1alpha1.SandboxRenderStatus] {
	return renderconfig.PlanStatus(p.o, p.res, p.now)
}

func (p *renderConfigPass) saw(render.Step, client.Object) {}

func (p *renderConfigPass) live(render.Step) client.Object { return nil }

func (p *renderConfigPass) withStatus(st *renderv1alpha1.SandboxRenderStatus) client.Object {
	o := p.o.DeepCopy()
	o.Status = *st
	return o
}

func (p *renderConfigPass) statusWritten(*render.Plan[renderv1alpha1.SandboxRenderStatus]) {}
