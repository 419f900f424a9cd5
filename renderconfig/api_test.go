package renderconfig

import (
	"testing"

	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
)

// TestSameNamesAsTheAPI: Config reads the API's SandboxRender, whose identity and condition
// names renderconfig repeats so that the function need not link the API package (its scheme
// builder is controller-runtime's). The repetitions must not drift.
func TestSameNamesAsTheAPI(t *testing.T) {
	cases := map[string]struct{ ours, api string }{
		"apiVersion":      {APIVersion, renderv1alpha1.GroupVersion.String()},
		"kind":            {Kind, renderv1alpha1.SandboxRenderKind},
		"condition":       {ConditionReady, renderv1alpha1.ConditionReady},
		"reason InForce":  {ReasonInForce, renderv1alpha1.ReasonInForce},
		"reason Invalid":  {ReasonInvalid, renderv1alpha1.ReasonInvalid},
		"reason Conflict": {ReasonConflict, renderv1alpha1.ReasonConflict},
	}
	for name, c := range cases {
		if c.ours != c.api {
			t.Errorf("%s: renderconfig says %q, the API %q", name, c.ours, c.api)
		}
	}
}
