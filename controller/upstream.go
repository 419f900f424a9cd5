package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationsFieldManager is the field manager of upstream's annotations (--upstream-annotations).
// It is not FieldManager: an apply sets exactly the fields its manager owns, so annotations
// applied as FieldManager would release the spec it applied to the same Sandbox.
const AnnotationsFieldManager = "sandbox-gitops-annotations"

// applyAnnotations server-side applies annotations, and only them, to an object users own.
func applyAnnotations(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, name string, annotations map[string]string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(AnnotationsFieldManager), client.ForceOwnership); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("applying upstream's annotations to %s %q: %w", gvk.Kind, name, err)
	}
	return nil
}
