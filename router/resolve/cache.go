package resolve

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// uidIndex indexes Sandboxes by metadata.uid for X-Sandbox-UID.
const uidIndex = "metadata.uid"

// Cache is a View over informers of Sandboxes and of the Pods that carry a sandbox name-hash
// label, in the served namespaces only. Objects are trimmed on the way in to the fields
// resolution reads, so the router's memory grows with the number of sandboxes, not with the
// size of their pod templates.
type Cache struct {
	cache  cache.Cache
	served Namespaces
	synced atomic.Bool
}

// NewCache creates the cache; Start runs it. namespaces empty means all namespaces (and
// cluster-wide list/watch permissions).
func NewCache(cfg *rest.Config, namespaces []string) (*Cache, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	hasHash, err := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	opts := cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Label: labels.NewSelector().Add(*hasHash), Transform: trimPod},
			&agentsv1beta1.Sandbox{}: {Transform: trimSandbox},
		},
	}
	served := Namespaces{}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
			served[ns] = true
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the Sandbox and Pod cache: %w", err)
	}
	if err := c.IndexField(context.Background(), &agentsv1beta1.Sandbox{}, uidIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	}); err != nil {
		return nil, fmt.Errorf("indexing Sandboxes by UID: %w", err)
	}
	return &Cache{cache: c, served: served}, nil
}

// Start runs the informers until ctx ends. It returns an error if they cannot sync within
// timeout (for example, missing RBAC or CRDs), naming what to check.
func (c *Cache) Start(ctx context.Context, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- c.cache.Start(ctx) }()
	// Ask for both informers now: a lazily created informer would first be requested by a
	// caller and make it wait.
	for _, o := range []client.Object{&agentsv1beta1.Sandbox{}, &corev1.Pod{}} {
		if _, err := c.cache.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("starting the %T informer: %w", o, err)
		}
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !c.cache.WaitForCacheSync(syncCtx) {
		select {
		case err := <-errc:
			return fmt.Errorf("the Sandbox and Pod cache stopped: %w", err)
		default:
		}
		return fmt.Errorf("the Sandbox and Pod cache did not sync within %s: check that the agent-sandbox CRDs are installed and that the router may list and watch sandboxes and pods", timeout)
	}
	c.synced.Store(true)
	return nil
}

// Ready reports whether the informers have synced.
func (c *Cache) Ready() bool { return c.synced.Load() }

// Resolve implements router.Resolver.
func (c *Cache) Resolve(_ context.Context, req router.Request) (router.Target, *router.Error) {
	return Resolve(req, c, c.served)
}

// The reads below hand out the cached objects themselves (no deep copy): Resolve only reads.
var noCopy = ptr.To(true)

// SandboxByUID implements View.
func (c *Cache) SandboxByUID(uid string) (*agentsv1beta1.Sandbox, bool) {
	var list agentsv1beta1.SandboxList
	if err := c.cache.List(context.Background(), &list, client.MatchingFields{uidIndex: uid},
		&client.ListOptions{UnsafeDisableDeepCopy: noCopy}); err != nil || len(list.Items) != 1 {
		return nil, false
	}
	return &list.Items[0], true
}

// Sandbox implements View.
func (c *Cache) Sandbox(namespace, name string) (*agentsv1beta1.Sandbox, bool) {
	var sb agentsv1beta1.Sandbox
	if err := c.cache.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &sb,
		&client.GetOptions{UnsafeDisableDeepCopy: noCopy}); err != nil {
		return nil, false
	}
	return &sb, true
}

// Pod implements View.
func (c *Cache) Pod(namespace, name string) (*corev1.Pod, bool) {
	var pod corev1.Pod
	if err := c.cache.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &pod,
		&client.GetOptions{UnsafeDisableDeepCopy: noCopy}); err != nil {
		return nil, false
	}
	return &pod, true
}

// trimPod keeps what resolution reads: identity, the name-hash label, the controller
// reference, deletion, phase and IPs.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            map[string]string{agentsv1beta1.SandboxNameHashLabel: p.Labels[agentsv1beta1.SandboxNameHashLabel]},
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return out, nil
}

// trimSandbox keeps identity, deletion, the pod-name annotation and the Ready condition; the
// spec (a whole pod template) is dropped.
func trimSandbox(obj any) (any, error) {
	s, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	out := &agentsv1beta1.Sandbox{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Generation: s.Generation, DeletionTimestamp: s.DeletionTimestamp,
		},
	}
	if a := s.Annotations[agentsv1beta1.SandboxPodNameAnnotation]; a != "" {
		out.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: a}
	}
	for _, c := range s.Status.Conditions {
		if c.Type == agentsv1beta1.ConditionReady {
			out.Status.Conditions = []metav1.Condition{c}
		}
	}
	return out, nil
}

var _ toolscache.TransformFunc = trimPod
