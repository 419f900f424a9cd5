package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The cache indexes the reconcilers look objects up by, registered by indexFields.
const (
	// nameHashIndex indexes cached Pods by their sandbox-name-hash label, so finding a Sandbox's
	// Pods costs a map lookup rather than a scan of the namespace.
	nameHashIndex = "sandboxNameHash"
	// claimUIDIndex finds a claim's Sandbox by its claim-uid label.
	claimUIDIndex = "claimUID"
	// warmPoolIndex finds a pool's members by their warm-pool label (the pool name's hash).
	warmPoolIndex = "warmPool"
	// poolRefIndex finds the claims of a pool.
	poolRefIndex = "warmPoolRef"
	// templateRefIndex finds the pools of a template.
	templateRefIndex = "templateRef"
)

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
