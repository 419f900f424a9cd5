package render

import (
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// AdoptWarmSandbox is what upstream's claim controller writes into a warm pool member when a
// claim adopts it (completeAdoption): the pool's labels and hashes go, launch-type becomes warm,
// the claim's identity labels come, the template-ref hash stays (or is set from the template);
// every owner reference is replaced by the claim's controller reference; and the pod template's
// metadata is replaced by the template's plus the claim's identity and additional metadata,
// which drops the pool's safe-to-evict unless the template sets it. With no template (nil), only
// the labels are added to the existing pod metadata. The spec is untouched: a warm Sandbox gets no
// environment injection. We do not write upstream's pod-name annotation (see the README).
func AdoptWarmSandbox(warm *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate) (*agentsv1beta1.Sandbox, *ClaimError) {
	sb := warm.DeepCopy()
	sb.TypeMeta = sandboxTypeMeta // a member read from a cache has none; an intent carries it
	refHash := sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel]
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	delete(sb.Labels, agentsv1beta1.SandboxWarmPoolLabel)
	delete(sb.Labels, agentsv1beta1.DeprecatedSandboxPodTemplateHashLabel)
	delete(sb.Labels, agentsv1beta1.SandboxTemplateHashLabel)
	sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] = agentsv1beta1.SandboxLaunchTypeWarm
	if sb.Spec.PodTemplate.ObjectMeta.Annotations[autoscalerSafeEvict] == "true" {
		delete(sb.Spec.PodTemplate.ObjectMeta.Annotations, autoscalerSafeEvict)
	}
	sb.OwnerReferences = controllerRef(extv1beta1.GroupVersion, extv1beta1.SandboxClaimKind, claim)
	if tc, ok := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; ok {
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		sb.Annotations[agentsv1beta1.TraceContextAnnotation] = tc
	}
	sb.Labels = claimIdentityLabels(sb.Labels, claim)
	if refHash == "" && t != nil {
		refHash = NameHash(t.Name)
	}
	if refHash != "" {
		sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	}

	if t == nil {
		md := &sb.Spec.PodTemplate.ObjectMeta
		md.Labels = claimIdentityLabels(md.Labels, claim)
		if refHash != "" {
			md.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
		}
		if err := mergePodMetadata(md, &claim.Spec.AdditionalPodMetadata); err != nil {
			return nil, err
		}
		return sb, nil
	}
	md, err := claimPodMetadata(claim, t, refHash)
	if err != nil {
		return nil, err
	}
	sb.Spec.PodTemplate.ObjectMeta = md
	return sb, nil
}

// claimPodMetadata is the pod template metadata of a claimed Sandbox, which upstream re-syncs on
// every pass so that template metadata edits reach claimed Sandboxes: the template's labels and
// annotations, the claim-uid, template-ref hash and created-by labels, and the claim's
// additional metadata.
func claimPodMetadata(claim *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate, refHash string) (agentsv1beta1.PodMetadata, *ClaimError) {
	md := *t.Spec.PodTemplate.ObjectMeta.DeepCopy()
	md.Labels = claimIdentityLabels(md.Labels, claim)
	if refHash != "" {
		md.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	}
	if err := mergePodMetadata(&md, &claim.Spec.AdditionalPodMetadata); err != nil {
		return agentsv1beta1.PodMetadata{}, err
	}
	return md, nil
}

// claimNeedsColdStart reports whether a claim must skip its warm pool and get a Sandbox of its
// own, as upstream decides before any adoption: a warm Sandbox was made without the claim's
// environment or volume claim templates, and adoption never changes a spec. Every env entry
// counts, a Secret or ConfigMap reference (valueFrom) as much as a literal.
func claimNeedsColdStart(claim *extv1beta1.SandboxClaim) bool {
	return len(claim.Spec.Env) > 0 || len(claim.Spec.VolumeClaimTemplates) > 0
}
