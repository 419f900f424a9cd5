package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// applySandbox server-side applies a Sandbox the claim and pool reconcilers make (a pool member,
// a claim's cold Sandbox, an adoption, a metadata re-sync) with FieldManager, forced, and
// returns the object the API server then has. A non-empty resourceVersion makes the write
// conditional: the API server refuses it with a 409 Conflict if the Sandbox changed since it was
// read, which is the lock that keeps two claims from adopting one Sandbox.
func applySandbox(ctx context.Context, c client.Client, intent *agentsv1beta1.Sandbox, resourceVersion string) (*agentsv1beta1.Sandbox, error) {
	m, err := toMap(intent)
	if err != nil {
		return nil, err
	}
	md, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "generation", "managedFields", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"} {
		delete(md, k)
	}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(agentsv1beta1.GroupVersion.String())
	u.SetKind(agentsv1beta1.SandboxKind)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying Sandbox %q: %w", intent.Name, err)
	}
	out := &agentsv1beta1.Sandbox{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("reading the applied Sandbox %q: %w", intent.Name, err)
	}
	return out, nil
}
