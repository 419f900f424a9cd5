package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestRetainCleanupOfForeignSandbox: a Retain cleanup that finds a Sandbox the claim does not
// control reports upstream's ClaimExpired message and keeps the claim's status.sandbox cleared.
func TestRetainCleanupOfForeignSandbox(t *testing.T) {
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}}
	claim.Status.SandboxStatus.Name = "c"
	now := metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st := ClaimStatus(claim, ClaimStatusInputs{Err: claimNotOwnedError("c", "c"), Expired: true}, now)
	want := extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 2, LastTransitionTime: now,
		Reason:  extv1beta1.ClaimExpiredReason,
		Message: `Claim expired. sandbox not owned by this claim: sandbox "c" is not owned by claim "c"; deletion skipped.`,
	}}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestUpdateStrategy(t *testing.T) {
	cases := map[string]struct {
		in   *extv1beta1.SandboxWarmPoolUpdateStrategy
		want extv1beta1.SandboxWarmPoolUpdateStrategyType
	}{
		"unset":    {nil, extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType},
		"empty":    {&extv1beta1.SandboxWarmPoolUpdateStrategy{}, extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType},
		"recreate": {&extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType}, extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &extv1beta1.SandboxWarmPool{}
			p.Spec.UpdateStrategy = tc.in
			if diff := cmp.Diff(tc.want, updateStrategy(p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
