// Package convert converts agent-sandbox objects between the deprecated v1alpha1 API and its
// v1beta1 hub, following upstream's rules (api/v1alpha1/*_conversion.go upstream). It is pure: no
// client, no webhook.
//
// Sandbox, SandboxTemplate, SandboxClaim and SandboxWarmPool are upstream's plain one-way rules.
// The *ToHub and *FromHub pairs (lossless.go) build on them and are what the project uses: the
// render's edge (manifest.Decode) reads v1alpha1 input with *ToHub, and the conversion webhook
// serves both. Every value one version cannot hold is kept in an annotation of the other, so a
// round trip in either direction gives back exactly what was written. Upstream instead copies the
// whole v1alpha1 object into an api.agents.x-k8s.io/v1alpha1-*-state annotation of the stored
// object, and loses v1beta1-only fields on a v1alpha1 update.
package convert

import (
	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// VolumeClaimTemplatesPolicyAnnotation is where upstream keeps a v1beta1 template's
// volumeClaimTemplatesPolicy when the template is read through v1alpha1, which has no such
// field. A v1alpha1 template carrying it converts back to that policy.
const VolumeClaimTemplatesPolicyAnnotation = "api.agents.x-k8s.io/v1beta1-volume-claim-templates-policy"

// ShadowPoolPrefix names the pool upstream's migration guide bootstraps for v1alpha1 claims
// that use the "none" or "default" warm pool policy: shadow-pool-<template name>.
const ShadowPoolPrefix = "shadow-pool-"

// Sandbox converts a v1alpha1 Sandbox: replicas 0 becomes operatingMode Suspended, anything else
// (including unset) Running.
func Sandbox(in *agentsv1alpha1.Sandbox) *agentsv1beta1.Sandbox {
	out := &agentsv1beta1.Sandbox{}
	out.APIVersion = agentsv1beta1.GroupVersion.String()
	out.Kind = agentsv1beta1.SandboxKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.PodTemplate = podTemplate(&in.Spec.PodTemplate)
	out.Spec.VolumeClaimTemplates = volumeClaimTemplates(in.Spec.VolumeClaimTemplates)
	out.Spec.Service = copyBool(in.Spec.Service)
	if in.Spec.ShutdownTime != nil {
		out.Spec.ShutdownTime = in.Spec.ShutdownTime.DeepCopy()
	}
	if in.Spec.ShutdownPolicy != nil {
		p := agentsv1beta1.ShutdownPolicy(*in.Spec.ShutdownPolicy)
		out.Spec.ShutdownPolicy = &p
	}
	if in.Spec.Replicas != nil && *in.Spec.Replicas == 0 {
		out.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	} else {
		out.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	}
	st := in.Status.DeepCopy()
	out.Status = agentsv1beta1.SandboxStatus{
		ServiceFQDN:   st.ServiceFQDN,
		Service:       st.Service,
		Conditions:    st.Conditions,
		LabelSelector: st.LabelSelector,
		PodIPs:        st.PodIPs,
	}
	return out
}

// SandboxTemplate converts a v1alpha1 template. volumeClaimTemplatesPolicy comes from upstream's
// round-trip annotation when it is present and not empty, and is otherwise left for defaulting
// (Disallowed). An empty annotation stays an annotation, so that it converts back as it was.
func SandboxTemplate(in *extv1alpha1.SandboxTemplate) *extv1beta1.SandboxTemplate {
	out := &extv1beta1.SandboxTemplate{}
	out.APIVersion = extv1beta1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxTemplateKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.PodTemplate = podTemplate(&in.Spec.PodTemplate)
	out.Spec.VolumeClaimTemplates = volumeClaimTemplates(in.Spec.VolumeClaimTemplates)
	out.Spec.Service = copyBool(in.Spec.Service)
	if in.Spec.NetworkPolicy != nil {
		np := in.Spec.NetworkPolicy.DeepCopy()
		out.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{Ingress: np.Ingress, Egress: np.Egress}
	}
	out.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagement(in.Spec.NetworkPolicyManagement)
	out.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy)
	if p := out.Annotations[VolumeClaimTemplatesPolicyAnnotation]; p != "" {
		out.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesPolicy(p)
		delete(out.Annotations, VolumeClaimTemplatesPolicyAnnotation)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
	}
	return out
}

// SandboxClaim converts a v1alpha1 claim. v1beta1 claims always name a warm pool:
//   - warmpool: <pool> names that pool;
//   - warmpool: none or default, with a warm-adopted Sandbox in status (its name differs from the
//     claim's), names the pool that Sandbox came from: its name minus the last "-suffix";
//   - otherwise shadow-pool-<template>, the pool upstream's migration guide bootstraps.
func SandboxClaim(in *extv1alpha1.SandboxClaim) *extv1beta1.SandboxClaim {
	out := &extv1beta1.SandboxClaim{}
	out.APIVersion = extv1beta1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxClaimKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.WarmPoolRef.Name = claimPoolName(in)
	if l := in.Spec.Lifecycle; l != nil {
		out.Spec.Lifecycle = &extv1beta1.Lifecycle{
			TTLSecondsAfterFinished: copyInt32(l.TTLSecondsAfterFinished),
			ShutdownPolicy:          extv1beta1.ShutdownPolicy(l.ShutdownPolicy),
		}
		if l.ShutdownTime != nil {
			out.Spec.Lifecycle.ShutdownTime = l.ShutdownTime.DeepCopy()
		}
	}
	md := in.Spec.AdditionalPodMetadata.DeepCopy()
	out.Spec.AdditionalPodMetadata = agentsv1beta1.PodMetadata{Labels: md.Labels, Annotations: md.Annotations}
	for _, e := range in.Spec.Env {
		out.Spec.Env = append(out.Spec.Env, extv1beta1.EnvVar{
			Name: e.Name, Value: copyString(e.Value), ValueFrom: envVarSource(e.ValueFrom), ContainerName: e.ContainerName,
		})
	}
	st := in.Status.DeepCopy()
	out.Status.Conditions = st.Conditions
	out.Status.SandboxStatus = extv1beta1.SandboxStatus{Name: st.SandboxStatus.Name, PodIPs: st.SandboxStatus.PodIPs}
	return out
}

func claimPoolName(in *extv1alpha1.SandboxClaim) string {
	if in.Spec.WarmPool != nil && in.Spec.WarmPool.IsSpecificPool() {
		return string(*in.Spec.WarmPool)
	}
	if sb := in.Status.SandboxStatus.Name; sb != "" && sb != in.Name {
		for i := len(sb) - 1; i > 0; i-- {
			if sb[i] == '-' {
				return sb[:i]
			}
		}
	}
	return ShadowPoolPrefix + in.Spec.TemplateRef.Name
}

// SandboxWarmPool converts a v1alpha1 pool; its required replicas becomes the optional pointer.
func SandboxWarmPool(in *extv1alpha1.SandboxWarmPool) *extv1beta1.SandboxWarmPool {
	out := &extv1beta1.SandboxWarmPool{}
	out.APIVersion = extv1beta1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxWarmPoolKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	replicas := in.Spec.Replicas
	out.Spec.Replicas = &replicas
	out.Spec.TemplateRef.Name = in.Spec.TemplateRef.Name
	if in.Spec.UpdateStrategy != nil {
		out.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{
			Type: extv1beta1.SandboxWarmPoolUpdateStrategyType(in.Spec.UpdateStrategy.Type),
		}
	}
	out.Status = extv1beta1.SandboxWarmPoolStatus{
		Replicas:      in.Status.Replicas,
		ReadyReplicas: in.Status.ReadyReplicas,
		Selector:      in.Status.Selector,
	}
	return out
}

func podTemplate(in *agentsv1alpha1.PodTemplate) agentsv1beta1.PodTemplate {
	c := in.DeepCopy()
	return agentsv1beta1.PodTemplate{
		Spec:       c.Spec,
		ObjectMeta: agentsv1beta1.PodMetadata{Labels: c.ObjectMeta.Labels, Annotations: c.ObjectMeta.Annotations},
	}
}

func volumeClaimTemplates(in []agentsv1alpha1.PersistentVolumeClaimTemplate) []agentsv1beta1.PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]agentsv1beta1.PersistentVolumeClaimTemplate, len(in))
	for i := range in {
		c := in[i].DeepCopy()
		out[i] = agentsv1beta1.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{
				Name: c.Name, Labels: c.Labels, Annotations: c.Annotations,
			},
			Spec: c.Spec,
		}
	}
	return out
}

// envVarSource copies a claim's Secret or ConfigMap reference; the two versions share its shape.
func envVarSource(in *extv1alpha1.EnvVarSource) *extv1beta1.EnvVarSource {
	if in == nil {
		return nil
	}
	return &extv1beta1.EnvVarSource{SecretKeyRef: in.SecretKeyRef.DeepCopy(), ConfigMapKeyRef: in.ConfigMapKeyRef.DeepCopy()}
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

func copyInt32(i *int32) *int32 {
	if i == nil {
		return nil
	}
	v := *i
	return &v
}
