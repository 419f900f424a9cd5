package renderconfig

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// PlanStatus is the controller's pass over one SandboxRender, the same plan contract as the
// agent-sandbox kinds': the status res gives it (the Ready condition Resolve decided for it, at
// its generation), written when it differs from the one it has. A SandboxRender has no children,
// so the plan has no steps. now is the transition time of a condition whose status changes (an
// unchanged status keeps its own); a SandboxRender res has no verdict on (one that arrived after
// res was resolved) gets no status write.
func PlanStatus(o *renderv1alpha1.SandboxRender, res Resolution, now time.Time) *render.Plan[renderv1alpha1.SandboxRenderStatus] {
	plan := &render.Plan[renderv1alpha1.SandboxRenderStatus]{}
	want, ok := res.Ready[o.Name]
	if !ok {
		return plan
	}
	want.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second)) // as the API server stores it
	st := o.Status.DeepCopy()
	st.ObservedGeneration = o.Generation
	meta.SetStatusCondition(&st.Conditions, want)
	plan.Status = st
	plan.WriteStatus = st.ObservedGeneration != o.Status.ObservedGeneration || !sameConditions(st.Conditions, o.Status.Conditions)
	return plan
}

// sameConditions: no status, reason, message or observed generation differs (SetStatusCondition
// keeps the transition time of an unchanged status).
func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message && x.ObservedGeneration == y.ObservedGeneration
	})
}
