package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// fullPod is a Pod as the API server returns it for a Sandbox: rendered, then scheduled and
// run, with the spec and status fields a kubelet and admission add.
func fullPod(t *testing.T, sb *agentsv1beta1.Sandbox, created time.Time) *corev1.Pod {
	t.Helper()
	children, err := Sandbox(sb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := children.Pod.DeepCopy()
	pod.UID = "pod-uid"
	pod.ResourceVersion = "42"
	pod.CreationTimestamp = metav1.NewTime(created)
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "sandbox-gitops", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	pod.Spec.NodeName = "node-a"
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}})
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}}
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodRunning,
		HostIP:   "192.168.0.1",
		PodIP:    "10.0.0.7",
		PodIPs:   []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}},
		QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, Image: "busybox", ImageID: "sha256:1", ContainerID: "containerd://1",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(created)}}}},
	}
	return pod
}

// TestObservedPodPlansTheSame: PlanSandbox and StatusHold decide the same on ObservedPod's part
// of a Pod as on the whole Pod, in every state a Sandbox's Pod passes through, so the controller
// can cache only that part.
func TestObservedPodPlansTheSame(t *testing.T) {
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", UID: "sb-uid", Generation: 2, CreationTimestamp: metav1.NewTime(created)},
		Spec: agentsv1beta1.SandboxSpec{
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
				PodTemplate: agentsv1beta1.PodTemplate{
					ObjectMeta: agentsv1beta1.PodMetadata{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "n"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}},
				},
				Service: ptr.To(true),
			},
		},
	}
	suspended := sb.DeepCopy()
	suspended.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended

	state := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := fullPod(t, sb, created.Add(time.Second))
		mutate(p)
		return p
	}
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		pods []*corev1.Pod
	}{
		"ready":   {sb: sb, pods: []*corev1.Pod{state(func(*corev1.Pod) {})}},
		"pending": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodPending} })}},
		"unschedulable": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes"}}}
		})}},
		"running, not ready": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Status.Conditions[3].Status = corev1.ConditionFalse })}},
		"image pull back-off": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.PodIPs, p.Status.PodIP = corev1.PodPending, nil, ""
			p.Status.Conditions[3].Status = corev1.ConditionFalse
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "127.0.0.1:1/missing:v1"`}}
		})}},
		"crash loop": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) {
			p.Status.Conditions[3].Status = corev1.ConditionFalse
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
			p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", ContainerID: "containerd://2"}}
		})}},
		"init container config error": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.PodIPs, p.Status.PodIP = corev1.PodPending, nil, ""
			p.Status.Conditions[3].Status = corev1.ConditionFalse
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", Image: "busybox",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "token" not found`}}}}
		})}},
		"ready without IPs":  {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Status.PodIPs, p.Status.PodIP = nil, "" })}},
		"succeeded":          {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}},
		"failed":             {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}},
		"stale metadata":     {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.Labels["app"] = "old"; p.Annotations = nil })}},
		"unowned, adoptable": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.OwnerReferences = nil })}},
		"owned by another": {sb: sb, pods: []*corev1.Pod{state(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
		})}},
		"terminating":   {sb: suspended, pods: []*corev1.Pod{state(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(created.Add(time.Minute))) })}},
		"suspending":    {sb: suspended, pods: []*corev1.Pod{state(func(*corev1.Pod) {})}},
		"multiple pods": {sb: sb, pods: []*corev1.Pod{state(func(*corev1.Pod) {}), state(func(p *corev1.Pod) { p.Name = "box-2"; p.UID = "pod-2" })}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, now := range []time.Time{created.Add(5 * time.Second), created.Add(time.Hour)} {
				trimmed := make([]*corev1.Pod, len(tc.pods))
				for i, p := range tc.pods {
					trimmed[i] = ObservedPod(p)
				}
				whole := PlanSandbox(tc.sb, SandboxFound{Pods: tc.pods}, metav1.NewTime(now), Options{})
				part := PlanSandbox(tc.sb, SandboxFound{Pods: trimmed}, metav1.NewTime(now), Options{})
				if diff := cmp.Diff(decisions(whole, tc.sb, now), decisions(part, tc.sb, now)); diff != "" {
					t.Errorf("at %v the plan differs on the observed part of the Pod (-whole +part):\n%s", now, diff)
				}
			}
		})
	}
}

// planDecisions is what a plan decides, without the observed Pod it carries.
type planDecisions struct {
	Expiry ExpiryDecision
	Steps  []Step
	Intent []any
	Status *agentsv1beta1.SandboxStatus
	Hold   time.Duration
}

func decisions(p *SandboxPlan, sb *agentsv1beta1.Sandbox, now time.Time) planDecisions {
	d := planDecisions{Expiry: p.Expiry, Steps: p.Steps, Status: p.Status}
	for _, s := range p.Steps {
		if s.Intent != nil {
			d.Intent = append(d.Intent, s.Intent.Object, s.Intent.Scope)
		}
	}
	if p.Status != nil {
		d.Hold = sandboxStatusHold(sb, p.Pod, p.Status, now)
	}
	return d
}

// TestObservedPod: what is kept of a Pod, and that nothing is shared with it.
func TestObservedPod(t *testing.T) {
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", UID: "sb-uid"},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}}},
	}
	pod := fullPod(t, sb, created)
	want := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: *pod.ObjectMeta.DeepCopy(),
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIPs:     []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}},
			Conditions: pod.Status.DeepCopy().Conditions,
		},
	}
	got := ObservedPod(pod)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ObservedPod (-want +got):\n%s", diff)
	}
	got.Labels["app"] = "changed"
	got.Status.Conditions[0].Reason = "changed"
	got.Status.PodIPs[0].IP = "changed"
	got.OwnerReferences[0].Name = "changed"
	if diff := cmp.Diff(fullPod(t, sb, created), pod); diff != "" {
		t.Errorf("changing the result changed the Pod (-was +now):\n%s", diff)
	}
}

// TestPodToReadByName: only a suspended Sandbox with no Pod observed has a Pod to read by name
// (a running one finds a taken name through its refused create).
func TestPodToReadByName(t *testing.T) {
	running := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "ns"}}
	suspended := running.DeepCopy()
	suspended.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	renamed := suspended.DeepCopy()
	renamed.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: "box-pod"}
	garbage := suspended.DeepCopy()
	garbage.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: "not/a pod"}
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "ns"}}
	type want struct {
		Name string
		Read bool
	}
	cases := map[string]struct {
		reason string
		sb     *agentsv1beta1.Sandbox
		obs    SandboxFound
		want   want
	}{
		"running":            {reason: "a running Sandbox's create finds a taken name", sb: running},
		"suspended, none":    {reason: "a suspended Sandbox with no Pod observed reads its pod name", sb: suspended, want: want{"box", true}},
		"suspended, renamed": {reason: "the pod-name annotation names the Pod", sb: renamed, want: want{"box-pod", true}},
		"suspended, garbage": {reason: "an annotation no Pod name can match names nothing to read", sb: garbage},
		"suspended, seen":    {reason: "a Pod observed needs no read", sb: suspended, obs: SandboxFound{Pods: []*corev1.Pod{own}}},
		"suspended, unknown": {reason: "a failed list is retried, not read around", sb: suspended, obs: SandboxFound{PodUnknown: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got want
			got.Name, got.Read = PodToReadByName(tc.sb, tc.obs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
