package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
)

// TestKinds: every row of the table names its object's kind as the scheme knows it, is found
// again from an object of its type, and makes an empty object only for a kind a step writes.
func TestKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme, renderv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range kinds {
		gvk, err := apiutil.GVKForObject(k.object, scheme)
		if err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		if gvk.Kind != k.name {
			t.Errorf("row %s holds a %s", k.name, gvk.Kind)
		}
		if got := kindOf(k.object.DeepCopyObject().(client.Object)); got != k.name {
			t.Errorf("kindOf(%T) = %q, want %q", k.object, got, k.name)
		}
		o := newObject(k.name)
		if (o != nil) != k.written {
			t.Errorf("newObject(%q) = %v, want an object: %v", k.name, o, k.written)
		}
		if o != nil && o == k.object {
			t.Errorf("newObject(%q) returned the table's own object", k.name)
		}
		if extractable(k.object) != (k.extract != nil) {
			t.Errorf("extractable(%T) disagrees with the table", k.object)
		}
	}
	if got := newObject("ConfigMap"); got != nil {
		t.Errorf("newObject(ConfigMap) = %T, want nil", got)
	}
}
