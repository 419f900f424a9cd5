package render

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

func waiting(name, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

// TestPodStuckCause: each of the kubelet's and the scheduler's reasons that do not clear by
// themselves is named with its container, and the reasons of a normal start name nothing.
func TestPodStuckCause(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."}
	crashing := waiting("agent", "CrashLoopBackOff", "back-off 2m40s restarting failed container=agent")
	crashing.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	cases := map[string]struct {
		status corev1.PodStatus
		want   string
	}{
		"nothing":            {status: corev1.PodStatus{Phase: corev1.PodPending}},
		"starting normally":  {status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "ContainerCreating", "")}}},
		"initializing":       {status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "PodInitializing", "")}}},
		"scheduling pending": {status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}},
		"unschedulable, an unbound claim": {
			status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}},
			want:   "Pod is unschedulable: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
		},
		"image pull error": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "ErrImagePull", "failed to pull image: connection refused")}},
			want:   `container "agent": ErrImagePull: failed to pull image: connection refused`,
		},
		"image pull back-off": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "ImagePullBackOff", `Back-off pulling image "127.0.0.1:1/missing:v1"`)}},
			want:   `container "agent": ImagePullBackOff: Back-off pulling image "127.0.0.1:1/missing:v1"`,
		},
		"crash loop, with its last exit": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{crashing}},
			want:   `container "agent": CrashLoopBackOff, last exit code 137 (OOMKilled)`,
		},
		"crash loop, no last state": {
			status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "CrashLoopBackOff", "back-off 10s")}},
			want:   `container "agent": CrashLoopBackOff`,
		},
		"config error of an init container": {
			status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{waiting("setup", "CreateContainerConfigError", `secret "token" not found`)}},
			want:   `init container "setup": CreateContainerConfigError: secret "token" not found`,
		},
		"every cause, in order, at most three": {
			status: corev1.PodStatus{
				Conditions:            []corev1.PodCondition{unschedulable},
				InitContainerStatuses: []corev1.ContainerStatus{waiting("setup", "InvalidImageName", "bad")},
				ContainerStatuses:     []corev1.ContainerStatus{waiting("a", "ErrImagePull", "x"), waiting("b", "ContainerCreating", ""), waiting("c", "RunContainerError", "y")},
			},
			want: "Pod is unschedulable: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.; " +
				`init container "setup": InvalidImageName: bad; container "a": ErrImagePull: x; and 1 more`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Status: tc.status}
			if diff := cmp.Diff(tc.want, podStuckCause(pod)); diff != "" {
				t.Errorf("PodStuckCause (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, podStuckCause(ObservedPod(pod))); diff != "" {
				t.Errorf("PodStuckCause of the observed part differs (-whole +part):\n%s", diff)
			}
			if tc.want != "" && !sandboxReportsStuck("Pod exists with phase: Pending; "+tc.want) {
				t.Errorf("sandboxReportsStuck does not recognise %q", tc.want)
			}
		})
	}
	if sandboxReportsStuck("Pod exists with phase: Pending; Service Exists") {
		t.Error("sandboxReportsStuck takes upstream's plain message for a stuck one")
	}
}

// TestPodStuckCauseClipsLongMessages: a pull error of any length takes at most maxCauseMessage
// bytes of the condition, cut on a rune boundary.
func TestPodStuckCauseClipsLongMessages(t *testing.T) {
	long := strings.Repeat("é", maxCauseMessage) // two bytes each
	got := podStuckCause(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("agent", "ErrImagePull", long)}}})
	prefix := `container "agent": ErrImagePull: `
	if body := strings.TrimPrefix(got, prefix); len(body) > maxCauseMessage+len("…") || !strings.HasSuffix(body, "…") || !strings.HasPrefix(body, "éé") {
		t.Errorf("the message is not clipped to %d bytes on a rune boundary: %d bytes, %q…", maxCauseMessage, len(body), got[:40])
	}
}

// TestStuckSandboxStatusIsNotHeld: a Pod stuck in image pulls within the startup window has its
// cause in the Sandbox's Ready message at once, where a normal start's status is held.
func TestStuckSandboxStatusIsNotHeld(t *testing.T) {
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	now := metav1.NewTime(created.Add(5 * time.Second))
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", UID: "sb-uid", Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "127.0.0.1:1/missing:v1"}}}}}}}
	pod := fullPod(t, sb, created.Add(time.Second))
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
	if hold := sandboxStatusHold(sb, pod, ptrStatus(activeStatus(sb, sandboxStatusInputs{Pod: pod}, now, Options{})), now.Time); hold == 0 {
		t.Fatal("a normal start within the window is not held; the test proves nothing")
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("agent", "ImagePullBackOff", `Back-off pulling image "127.0.0.1:1/missing:v1"`)}
	st := activeStatus(sb, sandboxStatusInputs{Pod: pod}, now, Options{})
	if hold := sandboxStatusHold(sb, pod, &st, now.Time); hold != 0 {
		t.Errorf("a stuck Pod's status is held for %v", hold)
	}
	var ready string
	for _, c := range st.Conditions {
		if c.Type == agentsv1beta1.ConditionReady {
			ready = c.Reason + ": " + c.Message
		}
	}
	want := `DependenciesNotReady: Pod exists with phase: Pending; container "agent": ImagePullBackOff: Back-off pulling image "127.0.0.1:1/missing:v1"`
	if diff := cmp.Diff(want, ready); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
}

func ptrStatus(s agentsv1beta1.SandboxStatus) *agentsv1beta1.SandboxStatus { return &s }

// TestClaimReadyDeadline: a claim whose Sandbox is still starting says, once the deadline has
// passed since the latest of its creation, its Sandbox's and its last fall from Ready, that it
// will not become Ready by itself, keeping upstream's reason in the message; other reasons stay.
func TestClaimReadyDeadline(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	deadline := 10 * time.Minute
	notReady := func(reason, message string) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(t0)},
			Status: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(t0)}}}}
	}
	pulling := notReady(agentsv1beta1.ReasonDependenciesNotReady, `Pod exists with phase: Pending; container "agent": ImagePullBackOff: Back-off`)
	claim := func(mutate func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
		c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1, CreationTimestamp: metav1.NewTime(t0)}}
		if mutate != nil {
			mutate(c)
		}
		return c
	}
	fellAt := func(at time.Time) func(*extv1beta1.SandboxClaim) {
		return func(c *extv1beta1.SandboxClaim) {
			c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: agentsv1beta1.ReasonDependenciesNotReady, LastTransitionTime: metav1.NewTime(at)}}
		}
	}
	exceeded := `DependenciesNotReady: Pod exists with phase: Pending; container "agent": ImagePullBackOff: Back-off; not Ready 10m0s after the claim was created or last Ready: it will not become Ready without someone acting`
	cases := map[string]struct {
		claim      *extv1beta1.SandboxClaim
		sandbox    *agentsv1beta1.Sandbox
		now        time.Time
		wantReason string
		wantAt     time.Time
	}{
		"before the deadline": {claim: claim(nil), sandbox: pulling, now: t0.Add(deadline - time.Second),
			wantReason: agentsv1beta1.ReasonDependenciesNotReady, wantAt: t0.Add(deadline)},
		"at the deadline": {claim: claim(nil), sandbox: pulling, now: t0.Add(deadline),
			wantReason: extv1beta1.ProgressDeadlineExceededReason, wantAt: t0.Add(deadline)},
		"a Sandbox younger than the claim": {claim: claim(nil), sandbox: func() *agentsv1beta1.Sandbox {
			sb := pulling.DeepCopy()
			sb.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
			return sb
		}(), now: t0.Add(time.Hour + deadline - time.Second), wantReason: agentsv1beta1.ReasonDependenciesNotReady, wantAt: t0.Add(time.Hour + deadline)},
		"fell from Ready later": {claim: claim(fellAt(t0.Add(time.Hour))), sandbox: pulling, now: t0.Add(time.Hour + time.Minute),
			wantReason: agentsv1beta1.ReasonDependenciesNotReady, wantAt: t0.Add(time.Hour + deadline)},
		"a finished Pod keeps its reason": {claim: claim(nil), sandbox: notReady(agentsv1beta1.ReasonPodSucceeded, "Pod completed successfully"),
			now: t0.Add(time.Hour), wantReason: agentsv1beta1.ReasonPodSucceeded, wantAt: t0.Add(deadline)},
		"an expired Sandbox keeps its reason": {claim: claim(nil), sandbox: notReady(agentsv1beta1.ReasonSandboxExpired, "Sandbox has expired"),
			now: t0.Add(time.Hour), wantReason: agentsv1beta1.ReasonSandboxExpired, wantAt: t0.Add(deadline)},
		"no creation time": {claim: claim(func(c *extv1beta1.SandboxClaim) { c.CreationTimestamp = metav1.Time{} }), sandbox: pulling,
			now: t0.Add(time.Hour), wantReason: agentsv1beta1.ReasonDependenciesNotReady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := ClaimStatus(tc.claim, ClaimStatusInputs{Sandbox: tc.sandbox, ReadyDeadline: deadline}, metav1.NewTime(tc.now))
			var got metav1.Condition
			for _, c := range st.Conditions {
				if c.Type == agentsv1beta1.ConditionReady {
					got = c
				}
			}
			if got.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q (message %q)", got.Reason, tc.wantReason, got.Message)
			}
			if got.Reason == extv1beta1.ProgressDeadlineExceededReason && got.Message != exceeded {
				t.Errorf("message (-want +got):\n%s", cmp.Diff(exceeded, got.Message))
			}
			at, ok := claimReadyDeadlineAt(tc.claim, tc.sandbox, deadline)
			if ok != !tc.wantAt.IsZero() || !at.Equal(tc.wantAt) {
				t.Errorf("ClaimReadyDeadlineAt = %v, %v; want %v", at, ok, tc.wantAt)
			}
		})
	}
}

// TestPlanClaimComesBackAtTheReadyDeadline: a claim whose Sandbox is still starting is looked at
// again when its deadline comes, and a claim whose status names a stuck Pod writes it at once,
// within the startup window that holds a normal start's.
func TestPlanClaimComesBackAtTheReadyDeadline(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default", CreationTimestamp: metav1.NewTime(t0)},
		Status: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: agentsv1beta1.ReasonDependenciesNotReady, Message: "Pod exists with phase: Pending", LastTransitionTime: metav1.NewTime(t0)}}}}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default", Generation: 1, CreationTimestamp: metav1.NewTime(t0)}}
	opts := Options{ClaimReadyDeadline: 5 * time.Minute}

	normal := PlanClaim(claim, ClaimFound{Sandbox: sb}, t0.Add(time.Minute), opts)
	if got, want := normal.RequeueAfter.Duration, 4*time.Minute; got != want {
		t.Errorf("a starting claim comes back after %v, want %v (its deadline)", got, want)
	}
	held := PlanClaim(claim, ClaimFound{Sandbox: sb}, t0.Add(time.Second), opts)
	if held.WriteStatus {
		t.Fatal("a normal start within the startup window is written; the test proves nothing")
	}
	stuck := sb.DeepCopy()
	stuck.Status.Conditions[0].Message += `; container "agent": ErrImagePull: connection refused`
	if p := PlanClaim(claim, ClaimFound{Sandbox: stuck}, t0.Add(time.Second), opts); !p.WriteStatus {
		t.Error("a claim whose Sandbox names a stuck Pod holds its status")
	}
	ready := sb.DeepCopy()
	ready.Status.Conditions[0].Status, ready.Status.Conditions[0].Reason = metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady
	if p := PlanClaim(claim, ClaimFound{Sandbox: ready}, t0.Add(time.Minute), opts); p.RequeueAfter.Duration != 0 {
		t.Errorf("a Ready claim comes back after %v", p.RequeueAfter.Duration)
	}
}
