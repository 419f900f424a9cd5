package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The tests read the cluster through controller-runtime's client, whose own log has nothing they
// report (the API server's warnings come through kube.warnings); without a logger it prints a
// stack trace into the test's output 30 s after the first client.
func init() { ctrllog.SetLogger(logr.Discard()) }

// kube are the test's clients, all as the cluster's admin.
type kube struct {
	cfg *rest.Config
	c   client.Client
	cs  kubernetes.Interface
	dyn dynamic.Interface
	// mapper is reset when a kind is not found, so kinds whose CRDs were just installed map.
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// warnings collects the API server's Warning headers on every request of these clients.
	warnings *warnings
}

// warnings is a rest.WarningHandler that keeps what it is given.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

func newKube(t *testing.T, admin *rest.Config) *kube {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	k := &kube{cfg: cfg, warnings: &warnings{}}
	cfg.WarningHandler = k.warnings
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		agentsv1alpha1.AddToScheme, agentsv1beta1.AddToScheme, extv1alpha1.AddToScheme, extv1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if k.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if k.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if k.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return k
}

// resource is the dynamic client of an object's resource, in its namespace if it has one.
func (k *kube) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return k.dyn.Resource(m.Resource), nil
}

// apply server-side applies the objects in order as manager, the way
// `kubectl apply --server-side` does (no force: a conflict is an error), and fails the test on
// any error or on any warning the API server sends back.
func (k *kube) apply(t *testing.T, ctx context.Context, what, manager string, objs []*unstructured.Unstructured) {
	t.Helper()
	k.warnings.take()
	for _, o := range objs {
		ri, err := k.resource(o)
		if err != nil {
			t.Fatalf("applying %s: %v", what, err)
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: manager}); err != nil {
			t.Fatalf("applying %s: %s %s/%s: %v", what, o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if w := k.warnings.take(); len(w) > 0 {
		t.Errorf("applying %s: the API server warned:\n  %s", what, strings.Join(w, "\n  "))
	}
}

// deleteAll deletes the objects as `kubectl delete -f` does (background propagation), ignoring
// those already gone.
func (k *kube) deleteAll(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		ri, err := k.resource(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// gone is nil once none of the objects exists.
func (k *kube) gone(ctx context.Context, objs []*unstructured.Unstructured) error {
	var left []string
	for _, o := range objs {
		ri, err := k.resource(o)
		if meta.IsNoMatchError(err) {
			continue // its CRD is gone, and the object with it
		}
		if err != nil {
			return err
		}
		if _, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err == nil {
			left = append(left, o.GetKind()+" "+strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still there: %s", strings.Join(left, ", "))
	}
	return nil
}

// deploymentAvailable is nil once every replica of the Deployment is updated and available.
func (k *kube) deploymentAvailable(ctx context.Context, ns, name string) error {
	d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if d.Generation != s.ObservedGeneration || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return fmt.Errorf("Deployment %s/%s: %d of %d replicas available (%d updated, %d in all)", ns, name, s.AvailableReplicas, want, s.UpdatedReplicas, s.Replicas)
	}
	return nil
}
