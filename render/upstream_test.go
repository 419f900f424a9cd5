package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestClaimUpstreamAnnotations: upstream's claim annotations, with upstream's values, only when
// asked for, each written once and then kept.
func TestClaimUpstreamAnnotations(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	const stamp = "2026-12-02T10:00:00.123456789Z"
	on := UpstreamAnnotations{Enabled: true, ClaimTiming: true}
	claim := func(ann map[string]string) *extv1beta1.SandboxClaim {
		return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Annotations: ann}}
	}
	sandbox := func(name, launch string) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{agentsv1beta1.SandboxLaunchTypeLabel: launch}}}
	}
	ready := &extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue}}}
	notReady := &extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse}}}
	cases := map[string]struct {
		claim *extv1beta1.SandboxClaim
		sb    *agentsv1beta1.Sandbox
		next  *extv1beta1.SandboxClaimStatus
		u     UpstreamAnnotations
		want  map[string]string
	}{
		"Off": {claim: claim(nil), sb: sandbox("pool-abcde", "warm"), next: ready},
		"FirstPass": {claim: claim(nil), next: notReady, u: on,
			want: map[string]string{ClaimFirstObservedAnnotation: stamp}},
		"WarmReadyAtOnce": {claim: claim(nil), sb: sandbox("pool-abcde", "warm"), next: ready, u: on,
			want: map[string]string{ClaimFirstObservedAnnotation: stamp, ClaimFirstReadyAnnotation: stamp, extv1beta1.AssignedSandboxNameAnnotation: "pool-abcde"}},
		"ColdReadyLater": {claim: claim(map[string]string{ClaimFirstObservedAnnotation: "2026-12-02T09:59:59Z"}), sb: sandbox("c", "cold"), next: ready, u: on,
			want: map[string]string{ClaimFirstObservedAnnotation: "2026-12-02T09:59:59Z", ClaimFirstReadyAnnotation: stamp}},
		"AllWrittenNothingToDo": {claim: claim(map[string]string{ClaimFirstObservedAnnotation: "a", ClaimFirstReadyAnnotation: "b", extv1beta1.AssignedSandboxNameAnnotation: "pool-abcde"}),
			sb: sandbox("pool-abcde", "warm"), next: notReady, u: on},
		"ReadyKeptWhenNoLongerReady": {claim: claim(map[string]string{ClaimFirstObservedAnnotation: "a", ClaimFirstReadyAnnotation: "b"}), sb: sandbox("pool-abcde", "warm"), next: notReady, u: on,
			want: map[string]string{ClaimFirstObservedAnnotation: "a", ClaimFirstReadyAnnotation: "b", extv1beta1.AssignedSandboxNameAnnotation: "pool-abcde"}},
		"TimingDisabled": {claim: claim(nil), sb: sandbox("pool-abcde", "warm"), next: ready, u: UpstreamAnnotations{Enabled: true},
			want: map[string]string{extv1beta1.AssignedSandboxNameAnnotation: "pool-abcde"}},
		"ColdNeverNamesItsSandbox": {claim: claim(map[string]string{ClaimFirstObservedAnnotation: "a", ClaimFirstReadyAnnotation: "b"}), sb: sandbox("c", "cold"), next: ready, u: on},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := claimUpstreamAnnotations(tc.claim, tc.sb, tc.next, now, tc.u)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSandboxUpstreamAnnotations: pod-name once the Pod is observed, never over a value there.
func TestSandboxUpstreamAnnotations(t *testing.T) {
	on := UpstreamAnnotations{Enabled: true}
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box"}}
	named := sb.DeepCopy()
	named.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: "adopted-pod"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "box"}}
	gone := pod.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		obs  SandboxFound
		u    UpstreamAnnotations
		want map[string]string
	}{
		"Off":              {sb: sb, obs: SandboxFound{Pods: []*corev1.Pod{pod}}},
		"NoPodYet":         {sb: sb, u: on},
		"PodObserved":      {sb: sb, obs: SandboxFound{Pods: []*corev1.Pod{pod}}, u: on, want: map[string]string{agentsv1beta1.SandboxPodNameAnnotation: "box"}},
		"PodGoing":         {sb: sb, obs: SandboxFound{Pods: []*corev1.Pod{gone}}, u: on},
		"NeverOverwritten": {sb: named, obs: SandboxFound{Pods: []*corev1.Pod{pod}}, u: on},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sandboxUpstreamAnnotations(tc.sb, tc.obs, tc.u)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
