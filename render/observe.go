package render

import (
	corev1 "k8s.io/api/core/v1"
)

// ObservedPod is the part of a Pod that a Sandbox pass reads: its whole metadata (name, labels,
// annotations, owner references, creation and deletion timestamps, managedFields), the node it
// runs on, its phase, conditions and IPs, and the container statuses that name why it is stuck
// (podStuckCause). PlanSandbox and its status hold decide the same on it as on the whole Pod, so
// a controller may keep only this in its cache: a Pod's spec and container statuses are most of
// its size, and a controller that never updates a running Pod's spec has no use for them. The result shares nothing with pod that a caller could change through it.
func ObservedPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: pod.TypeMeta}
	pod.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.NodeName = pod.Spec.NodeName
	out.Status.Phase = pod.Status.Phase
	if pod.Status.Conditions != nil {
		out.Status.Conditions = make([]corev1.PodCondition, len(pod.Status.Conditions))
		for i := range pod.Status.Conditions {
			pod.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	out.Status.InitContainerStatuses = observedStuckStatuses(pod.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = observedStuckStatuses(pod.Status.ContainerStatuses)
	if pod.Status.PodIPs != nil {
		out.Status.PodIPs = append([]corev1.PodIP(nil), pod.Status.PodIPs...)
	}
	return out
}
