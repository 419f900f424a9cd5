package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// SendStep sends one step of a plan in namespace the way the executor sends it (server-side
// apply on its precondition, or a delete on it), for the benchmarks of package controller_test,
// which send a claim's writes themselves to measure the API server's floor.
func SendStep(ctx context.Context, c client.Client, namespace string, s render.Step) error {
	a := applier{client: c, reader: c}
	if s.Action == render.ActionDelete {
		_, err := a.delete(ctx, namespace, s)
		return err
	}
	_, err := a.apply(ctx, s, nil)
	return err
}
