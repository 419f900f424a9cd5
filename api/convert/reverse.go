package convert

import (
	"strings"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The functions in this file are the plain v1beta1 → v1alpha1 direction, upstream's rules
// without any kept state: what a v1alpha1 reader sees of a v1beta1 object that was never
// written through v1alpha1. The lossless pairs in lossless.go build on them.

// sandboxV1alpha1 follows upstream: operatingMode Suspended is replicas 0, anything else 1, and
// status.replicas (which only v1alpha1 has) is made up the same way, but only once there is a
// status: a Sandbox no controller has seen yet reports no replicas (upstream reports 1), so that
// one created through v1alpha1, whose status the API server empties, converts back as it was.
func sandboxV1alpha1(in *agentsv1beta1.Sandbox) *agentsv1alpha1.Sandbox {
	out := &agentsv1alpha1.Sandbox{}
	out.APIVersion = agentsv1alpha1.GroupVersion.String()
	out.Kind = agentsv1beta1.SandboxKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.PodTemplate = podTemplateV1alpha1(&in.Spec.PodTemplate)
	out.Spec.VolumeClaimTemplates = volumeClaimTemplatesV1alpha1(in.Spec.VolumeClaimTemplates)
	out.Spec.Service = copyBool(in.Spec.Service)
	if in.Spec.ShutdownTime != nil {
		out.Spec.ShutdownTime = in.Spec.ShutdownTime.DeepCopy()
	}
	if in.Spec.ShutdownPolicy != nil {
		p := agentsv1alpha1.ShutdownPolicy(*in.Spec.ShutdownPolicy)
		out.Spec.ShutdownPolicy = &p
	}
	replicas := statusReplicas(in.Spec.OperatingMode)
	out.Spec.Replicas = &replicas
	st := in.Status.DeepCopy()
	out.Status = agentsv1alpha1.SandboxStatus{
		ServiceFQDN:   st.ServiceFQDN,
		Service:       st.Service,
		Conditions:    st.Conditions,
		LabelSelector: st.LabelSelector,
		PodIPs:        st.PodIPs,
	}
	if hasStatus(&in.Status) {
		out.Status.Replicas = replicas
	}
	return out
}

// statusReplicas is the replica count upstream shows a v1alpha1 reader for an operating mode.
func statusReplicas(mode agentsv1beta1.SandboxOperatingMode) int32 {
	if mode == agentsv1beta1.SandboxOperatingModeSuspended {
		return 0
	}
	return 1
}

func hasStatus(s *agentsv1beta1.SandboxStatus) bool {
	return s.ServiceFQDN != "" || s.Service != "" || len(s.Conditions) > 0 || s.LabelSelector != "" || len(s.PodIPs) > 0 || s.NodeName != ""
}

// sandboxTemplateV1alpha1 carries volumeClaimTemplatesPolicy, which v1alpha1 lacks, in upstream's
// own annotation, so an object read from either project converts back the same way. An empty
// policy writes nothing and leaves an annotation already there alone.
func sandboxTemplateV1alpha1(in *extv1beta1.SandboxTemplate) *extv1alpha1.SandboxTemplate {
	out := &extv1alpha1.SandboxTemplate{}
	out.APIVersion = extv1alpha1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxTemplateKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.PodTemplate = podTemplateV1alpha1(&in.Spec.PodTemplate)
	out.Spec.VolumeClaimTemplates = volumeClaimTemplatesV1alpha1(in.Spec.VolumeClaimTemplates)
	out.Spec.Service = copyBool(in.Spec.Service)
	if in.Spec.NetworkPolicy != nil {
		np := in.Spec.NetworkPolicy.DeepCopy()
		out.Spec.NetworkPolicy = &extv1alpha1.NetworkPolicySpec{Ingress: np.Ingress, Egress: np.Egress}
	}
	out.Spec.NetworkPolicyManagement = extv1alpha1.NetworkPolicyManagement(in.Spec.NetworkPolicyManagement)
	out.Spec.EnvVarsInjectionPolicy = extv1alpha1.EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy)
	if p := in.Spec.VolumeClaimTemplatesPolicy; p != "" {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[VolumeClaimTemplatesPolicyAnnotation] = string(p)
	}
	return out
}

// sandboxClaimV1alpha1 follows upstream: shadow-pool-<template> is template <template> with the
// default policy; any other pool is that pool as the policy and, for want of anything better, as
// the template too.
func sandboxClaimV1alpha1(in *extv1beta1.SandboxClaim) *extv1alpha1.SandboxClaim {
	out := &extv1alpha1.SandboxClaim{}
	out.APIVersion = extv1alpha1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxClaimKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	ref := claimRefOfPool(in.Spec.WarmPoolRef.Name)
	out.Spec.TemplateRef.Name = ref.Template
	out.Spec.WarmPool = copyPolicy(ref.WarmPool)
	if l := in.Spec.Lifecycle; l != nil {
		out.Spec.Lifecycle = &extv1alpha1.Lifecycle{
			TTLSecondsAfterFinished: copyInt32(l.TTLSecondsAfterFinished),
			ShutdownPolicy:          extv1alpha1.ShutdownPolicy(l.ShutdownPolicy),
		}
		if l.ShutdownTime != nil {
			out.Spec.Lifecycle.ShutdownTime = l.ShutdownTime.DeepCopy()
		}
	}
	md := in.Spec.AdditionalPodMetadata.DeepCopy()
	out.Spec.AdditionalPodMetadata = agentsv1alpha1.PodMetadata{Labels: md.Labels, Annotations: md.Annotations}
	for _, e := range in.Spec.Env {
		out.Spec.Env = append(out.Spec.Env, extv1alpha1.EnvVar{
			Name: e.Name, Value: copyString(e.Value), ValueFrom: envVarSourceV1alpha1(e.ValueFrom), ContainerName: e.ContainerName,
		})
	}
	st := in.Status.DeepCopy()
	out.Status.Conditions = st.Conditions
	out.Status.SandboxStatus = extv1alpha1.SandboxStatus{Name: st.SandboxStatus.Name, PodIPs: st.SandboxStatus.PodIPs}
	return out
}

// claimRef is what a v1alpha1 claim says instead of a pool: a template and a warm pool policy.
type claimRef struct {
	Template string                      `json:"sandboxTemplateRef"`
	WarmPool *extv1alpha1.WarmPoolPolicy `json:"warmpool"`
}

func (r claimRef) equal(o claimRef) bool {
	if r.Template != o.Template || (r.WarmPool == nil) != (o.WarmPool == nil) {
		return false
	}
	return r.WarmPool == nil || *r.WarmPool == *o.WarmPool
}

func claimRefOf(c *extv1alpha1.SandboxClaim) claimRef {
	return claimRef{Template: c.Spec.TemplateRef.Name, WarmPool: c.Spec.WarmPool}
}

func claimRefOfPool(pool string) claimRef {
	if tpl, ok := strings.CutPrefix(pool, ShadowPoolPrefix); ok {
		p := extv1alpha1.WarmPoolPolicyDefault
		return claimRef{Template: tpl, WarmPool: &p}
	}
	p := extv1alpha1.WarmPoolPolicy(pool)
	return claimRef{Template: pool, WarmPool: &p}
}

// sandboxWarmPoolV1alpha1 follows upstream: an unset replicas (v1beta1 defaults it to 1) reads as
// 1, since v1alpha1 requires the field.
func sandboxWarmPoolV1alpha1(in *extv1beta1.SandboxWarmPool) *extv1alpha1.SandboxWarmPool {
	out := &extv1alpha1.SandboxWarmPool{}
	out.APIVersion = extv1alpha1.GroupVersion.String()
	out.Kind = extv1beta1.SandboxWarmPoolKind
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Replicas = poolReplicas(in.Spec.Replicas)
	out.Spec.TemplateRef.Name = in.Spec.TemplateRef.Name
	if in.Spec.UpdateStrategy != nil {
		out.Spec.UpdateStrategy = &extv1alpha1.SandboxWarmPoolUpdateStrategy{
			Type: extv1alpha1.SandboxWarmPoolUpdateStrategyType(in.Spec.UpdateStrategy.Type),
		}
	}
	out.Status = extv1alpha1.SandboxWarmPoolStatus{
		Replicas:      in.Status.Replicas,
		ReadyReplicas: in.Status.ReadyReplicas,
		Selector:      in.Status.Selector,
	}
	return out
}

func poolReplicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func podTemplateV1alpha1(in *agentsv1beta1.PodTemplate) agentsv1alpha1.PodTemplate {
	c := in.DeepCopy()
	return agentsv1alpha1.PodTemplate{
		Spec:       c.Spec,
		ObjectMeta: agentsv1alpha1.PodMetadata{Labels: c.ObjectMeta.Labels, Annotations: c.ObjectMeta.Annotations},
	}
}

func volumeClaimTemplatesV1alpha1(in []agentsv1beta1.PersistentVolumeClaimTemplate) []agentsv1alpha1.PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]agentsv1alpha1.PersistentVolumeClaimTemplate, len(in))
	for i := range in {
		c := in[i].DeepCopy()
		out[i] = agentsv1alpha1.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata{
				Name: c.Name, Labels: c.Labels, Annotations: c.Annotations,
			},
			Spec: c.Spec,
		}
	}
	return out
}

func envVarSourceV1alpha1(in *extv1beta1.EnvVarSource) *extv1alpha1.EnvVarSource {
	if in == nil {
		return nil
	}
	return &extv1alpha1.EnvVarSource{SecretKeyRef: in.SecretKeyRef.DeepCopy(), ConfigMapKeyRef: in.ConfigMapKeyRef.DeepCopy()}
}

func copyPolicy(p *extv1alpha1.WarmPoolPolicy) *extv1alpha1.WarmPoolPolicy {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
