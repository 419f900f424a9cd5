package renderconfig

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestPlanStatus: a SandboxRender's pass writes the Ready condition Resolve gave it, at its
// generation, only when it changes; an unchanged status keeps its transition time.
func TestPlanStatus(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 500_000_000, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	inForce := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonInForce, Message: "in force", ObservedGeneration: 2}
	obj := func(generation int64, conditions ...metav1.Condition) *renderv1alpha1.SandboxRender {
		o := &renderv1alpha1.SandboxRender{ObjectMeta: metav1.ObjectMeta{Name: "render", Namespace: "team-a", Generation: generation}}
		o.Status.Conditions = conditions
		if len(conditions) > 0 {
			o.Status.ObservedGeneration = conditions[0].ObservedGeneration
		}
		return o
	}
	stamped := func(c metav1.Condition, at metav1.Time) metav1.Condition { c.LastTransitionTime = at; return c }
	res := Resolution{Ready: map[string]metav1.Condition{"render": inForce}}
	cases := map[string]struct {
		obj  *renderv1alpha1.SandboxRender
		res  Resolution
		want *render.Plan[renderv1alpha1.SandboxRenderStatus]
	}{
		"FirstStatus": {
			obj: obj(2), res: res,
			want: &render.Plan[renderv1alpha1.SandboxRenderStatus]{WriteStatus: true, Status: &renderv1alpha1.SandboxRenderStatus{
				ObservedGeneration: 2, Conditions: []metav1.Condition{stamped(inForce, metav1.NewTime(now.Truncate(time.Second)))}}},
		},
		"Unchanged": {
			obj: obj(2, stamped(inForce, earlier)), res: res,
			want: &render.Plan[renderv1alpha1.SandboxRenderStatus]{Status: &renderv1alpha1.SandboxRenderStatus{
				ObservedGeneration: 2, Conditions: []metav1.Condition{stamped(inForce, earlier)}}},
		},
		"NewMessageSameStatus": {
			obj: obj(2, stamped(func() metav1.Condition { c := inForce; c.Message = "old"; return c }(), earlier)), res: res,
			want: &render.Plan[renderv1alpha1.SandboxRenderStatus]{WriteStatus: true, Status: &renderv1alpha1.SandboxRenderStatus{
				ObservedGeneration: 2, Conditions: []metav1.Condition{stamped(inForce, earlier)}}},
		},
		"NoVerdict": {
			obj: obj(2), res: Resolution{Ready: map[string]metav1.Condition{}},
			want: &render.Plan[renderv1alpha1.SandboxRenderStatus]{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PlanStatus(tc.obj, tc.res, now)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
