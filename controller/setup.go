package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Options configure the controller: the render options the function has, and workers per kind.
type Options struct {
	// Render are the render options of a namespace without a SandboxRender of its own (the
	// cluster-wide default, --render-config); one with its SandboxRender is rendered with that.
	Render render.Options
	// SandboxWorkers and TemplateWorkers are the concurrent reconciles per kind (upstream: 100
	// and 1). Zero means those defaults.
	SandboxWorkers, TemplateWorkers int
	// ClaimWorkers and PoolWorkers are the concurrent reconciles of claims and pools (upstream:
	// 50 and 1). Zero means those defaults.
	ClaimWorkers, PoolWorkers int
	// Namespaces limits the controller to these namespaces; empty means all.
	Namespaces []string
	// Controllers are the reconcilers to run, by name (see Controllers); empty means all.
	Controllers []string
	// Upstream writes upstream's annotations into Sandboxes and claims (--upstream-annotations).
	Upstream render.UpstreamAnnotations
	// BackgroundHold is the longest a pass nobody waits on (render.Plan.Background) is held
	// while writes somebody waits on are in flight; 0 means DefaultBackgroundHold, a negative
	// value holds nothing (--background-hold).
	BackgroundHold time.Duration
	// Now is the reconcilers' clock; time.Now when nil. Time enters render only as this value,
	// so a test can run the controller at the moment a preview shows (render.Options.Now).
	Now func() time.Time
}

// Controllers are the names of the reconcilers, for Options.Controllers.
var Controllers = []string{"sandbox", "sandboxtemplate", "sandboxclaim", "sandboxwarmpool", "sandboxrender"}

func (o Options) runs(name string) bool {
	return len(o.Controllers) == 0 || slices.Contains(o.Controllers, name)
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
			&networkingv1.NetworkPolicy{}:   {Transform: keepOwnManagedFields, UnsafeDisableDeepCopy: shared},
			&agentsv1beta1.Sandbox{}:        {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxTemplate{}:   {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxClaim{}:      {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&extv1beta1.SandboxWarmPool{}:   {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
			&renderv1alpha1.SandboxRender{}: {Transform: cache.TransformStripManagedFields(), UnsafeDisableDeepCopy: shared},
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
	for i := range pod.ManagedFields {
		pod.ManagedFields[i].FieldsV1 = metadataFields(pod.ManagedFields[i].FieldsV1)
	}
	return render.ObservedPod(pod), nil
}

// metadataFields is the metadata part of a managedFields entry's field set. An existing Pod is
// only ever applied its metadata (its spec is never updated; render scopes every Pod update to
// labels, annotations and owner references), so that is all the applier's compare reads of it;
// the spec's fields were most of what a cached Pod held (and a Pod that must be written is read
// whole from the API server first). A field set that does not parse is kept as it is.
func metadataFields(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil {
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(f.Raw, &all) != nil {
		return f
	}
	md, ok := all["f:metadata"]
	if !ok {
		return &metav1.FieldsV1{Raw: []byte("{}")}
	}
	raw, err := json.Marshal(map[string]json.RawMessage{"f:metadata": md})
	if err != nil {
		return f
	}
	return &metav1.FieldsV1{Raw: raw}
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

// Setup registers the reconcilers Options.Controllers names (all by default) with mgr. They
// share one executor, and with it one memory of their writes (expectations): a claim's adoption
// is what a pool's pass must not undo.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := indexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	hold := opts.BackgroundHold
	if hold == 0 {
		hold = DefaultBackgroundHold
	}
	g := newGate(hold, opts.Now)
	events := newEventSink(mgr.GetEventRecorder("sandbox-gitops"), g)
	g.send = events.send
	if err := mgr.Add(g); err != nil {
		return err
	}
	x := &executor{client: mgr.GetClient(), reader: mgr.GetAPIReader(), applies: newApplyTransport(mgr),
		events: events, expect: newExpectations(), gate: g, now: opts.Now}
	configs := newRenderConfigs(mgr.GetClient(), opts.Render, opts.Upstream)
	workers := func(n, def int) int {
		if n > 0 {
			return n
		}
		return def
	}
	var members *pointerIndex[*agentsv1beta1.Sandbox]
	if opts.runs("sandboxclaim") || opts.runs("sandboxwarmpool") {
		members = poolMembers()
		if err := addIndexHandler(mgr, &agentsv1beta1.Sandbox{}, members.handler()); err != nil {
			return err
		}
	}
	reconcilers := []struct {
		name string
		r    interface{ SetupWithManager(ctrl.Manager) error }
	}{
		{"sandbox", &SandboxReconciler{x: x, configs: configs, workers: workers(opts.SandboxWorkers, 100)}},
		{"sandboxtemplate", &TemplateReconciler{x: x, configs: configs, workers: workers(opts.TemplateWorkers, 1)}},
		{"sandboxclaim", &ClaimReconciler{x: x, configs: configs, workers: workers(opts.ClaimWorkers, 50), members: members}},
		{"sandboxwarmpool", &PoolReconciler{x: x, configs: configs, workers: workers(opts.PoolWorkers, 1), members: members}},
		{"sandboxrender", &SandboxRenderReconciler{Client: mgr.GetClient(), configs: configs}},
	}
	for _, rc := range reconcilers {
		if !opts.runs(rc.name) {
			continue
		}
		if err := rc.r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", rc.name, err)
		}
	}
	return nil
}

// indexFields registers the cache indexes the reconcilers look up by.
func indexFields(ctx context.Context, idx client.FieldIndexer) error {
	label := func(key string) client.IndexerFunc {
		return func(o client.Object) []string {
			if v := o.GetLabels()[key]; v != "" {
				return []string{v}
			}
			return nil
		}
	}
	for _, x := range []struct {
		obj   client.Object
		field string
		f     client.IndexerFunc
	}{
		{&corev1.Pod{}, nameHashIndex, label(agentsv1beta1.SandboxNameHashLabel)},
		{&agentsv1beta1.Sandbox{}, claimUIDIndex, label(extv1beta1.SandboxIDLabel)},
		{&agentsv1beta1.Sandbox{}, warmPoolIndex, label(agentsv1beta1.SandboxWarmPoolLabel)},
		{&extv1beta1.SandboxClaim{}, poolRefIndex, func(o client.Object) []string {
			return []string{o.(*extv1beta1.SandboxClaim).Spec.WarmPoolRef.Name}
		}},
		{&extv1beta1.SandboxWarmPool{}, templateRefIndex, func(o client.Object) []string {
			return []string{o.(*extv1beta1.SandboxWarmPool).Spec.TemplateRef.Name}
		}},
	} {
		if err := idx.IndexField(ctx, x.obj, x.field, x.f); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", x.obj, x.field, err)
		}
	}
	return nil
}

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
