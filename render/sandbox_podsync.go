package render

import (
	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// syncPodMetadata computes the labels and annotations an existing Pod should carry, given what it
// carries now. Upstream never touches an existing Pod's spec but keeps its metadata live: template
// labels and annotations are set, the ones the template dropped are deleted (the Pod's bookkeeping
// annotations say which keys came from the template), system keys smuggled in through earlier
// templates are scrubbed, and the name-hash, extension and created-by labels are forced. Labels
// and annotations that other writers put on the Pod are kept.
func syncPodMetadata(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) (labels, annotations map[string]string) {
	wantLabels, wantAnnotations := PodMetadata(sb)

	labels = make(map[string]string, len(pod.Labels)+len(wantLabels))
	for k, v := range pod.Labels {
		labels[k] = v
	}
	for _, k := range splitKeys(pod.Annotations[agentsv1beta1.SandboxPropagatedLabelsAnnotation]) {
		if k != agentsv1beta1.SandboxNameHashLabel {
			delete(labels, k)
		}
	}
	// Keys that only the Sandbox may decide: present when computed, absent otherwise.
	delete(labels, agentsv1beta1.SandboxWarmPoolLabel)
	delete(labels, agentsv1beta1.SandboxTemplateRefHashLabel)
	delete(labels, agentsv1beta1.CreatedByLabel)
	for k, v := range wantLabels {
		labels[k] = v
	}

	annotations = make(map[string]string, len(pod.Annotations)+len(wantAnnotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	for _, k := range splitKeys(pod.Annotations[agentsv1beta1.SandboxPropagatedAnnotationsAnnotation]) {
		delete(annotations, k)
	}
	delete(annotations, agentsv1beta1.SandboxPropagatedLabelsAnnotation)
	delete(annotations, agentsv1beta1.SandboxPropagatedAnnotationsAnnotation)
	for k, v := range wantAnnotations {
		annotations[k] = v
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	return labels, annotations
}
