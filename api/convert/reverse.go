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
	out := &agentsv1alpha1.Sandbox{TypeMeta: typeMeta(agentsv1alpha1.GroupVersion, agentsv1beta1.SandboxKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.PodTemplate, out.Spec.VolumeClaimTemplates, out.Spec.Service = blueprintV1alpha1(&in.Spec.SandboxBlueprint)
	out.Spec.ShutdownTime = in.Spec.ShutdownTime.DeepCopy()
	out.Spec.ShutdownPolicy = (*agentsv1alpha1.ShutdownPolicy)(clone(in.Spec.ShutdownPolicy))
	replicas := statusReplicas(in.Spec.OperatingMode)
	out.Spec.Replicas = &replicas
	st := in.Status.DeepCopy() // all but nodeName, which v1alpha1 does not hold
	out.Status = agentsv1alpha1.SandboxStatus{ServiceFQDN: st.ServiceFQDN, Service: st.Service, Conditions: st.Conditions, LabelSelector: st.LabelSelector, PodIPs: st.PodIPs}
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
	out := &extv1alpha1.SandboxTemplate{TypeMeta: typeMeta(extv1alpha1.GroupVersion, extv1beta1.SandboxTemplateKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.PodTemplate, out.Spec.VolumeClaimTemplates, out.Spec.Service = blueprintV1alpha1(&in.Spec.SandboxBlueprint)
	out.Spec.NetworkPolicy = (*extv1alpha1.NetworkPolicySpec)(in.Spec.NetworkPolicy.DeepCopy())
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

// blueprintV1alpha1 converts v1beta1's SandboxBlueprint to the fields a v1alpha1 Sandbox and
// template hold in its place.
func blueprintV1alpha1(in *agentsv1beta1.SandboxBlueprint) (agentsv1alpha1.PodTemplate, []agentsv1alpha1.PersistentVolumeClaimTemplate, *bool) {
	c := in.PodTemplate.DeepCopy()
	pt := agentsv1alpha1.PodTemplate{Spec: c.Spec, ObjectMeta: agentsv1alpha1.PodMetadata(c.ObjectMeta)}
	return pt, convertEach(in.VolumeClaimTemplates, volumeClaimTemplateV1alpha1), clone(in.Service)
}

// volumeClaimTemplateV1alpha1 is volumeClaimTemplate's reverse.
func volumeClaimTemplateV1alpha1(in *agentsv1beta1.PersistentVolumeClaimTemplate) agentsv1alpha1.PersistentVolumeClaimTemplate {
	c := in.DeepCopy()
	return agentsv1alpha1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata(c.EmbeddedObjectMetadata), Spec: c.Spec}
}

// sandboxClaimV1alpha1 follows upstream: shadow-pool-<template> is template <template> with the
// default policy; any other pool is that pool as the policy and, for want of anything better, as
// the template too.
func sandboxClaimV1alpha1(in *extv1beta1.SandboxClaim) *extv1alpha1.SandboxClaim {
	out := &extv1alpha1.SandboxClaim{TypeMeta: typeMeta(extv1alpha1.GroupVersion, extv1beta1.SandboxClaimKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	ref := claimRefOfPool(in.Spec.WarmPoolRef.Name)
	out.Spec.TemplateRef.Name = ref.Template
	out.Spec.WarmPool = clone(ref.WarmPool)
	out.Spec.Lifecycle = convertPtr(in.Spec.Lifecycle, claimLifecycleV1alpha1)
	out.Spec.AdditionalPodMetadata = agentsv1alpha1.PodMetadata(*in.Spec.AdditionalPodMetadata.DeepCopy())
	if len(in.Spec.Env) > 0 { // an empty list converts to none
		out.Spec.Env = convertEach(in.Spec.Env, envVarV1alpha1)
	}
	st := in.Status.DeepCopy()
	out.Status = extv1alpha1.SandboxClaimStatus{Conditions: st.Conditions, SandboxStatus: extv1alpha1.SandboxStatus(st.SandboxStatus)}
	return out
}

// claimLifecycleV1alpha1 is claimLifecycle's reverse.
func claimLifecycleV1alpha1(in *extv1beta1.Lifecycle) extv1alpha1.Lifecycle {
	c := in.DeepCopy()
	return extv1alpha1.Lifecycle{
		ShutdownTime: c.ShutdownTime, TTLSecondsAfterFinished: c.TTLSecondsAfterFinished, ShutdownPolicy: extv1alpha1.ShutdownPolicy(c.ShutdownPolicy),
	}
}

// envVarV1alpha1 is envVar's reverse.
func envVarV1alpha1(in *extv1beta1.EnvVar) extv1alpha1.EnvVar {
	c := in.DeepCopy()
	return extv1alpha1.EnvVar{Name: c.Name, Value: c.Value, ValueFrom: (*extv1alpha1.EnvVarSource)(c.ValueFrom), ContainerName: c.ContainerName}
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
	out := &extv1alpha1.SandboxWarmPool{TypeMeta: typeMeta(extv1alpha1.GroupVersion, extv1beta1.SandboxWarmPoolKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.Replicas = poolReplicas(in.Spec.Replicas)
	out.Spec.TemplateRef.Name = in.Spec.TemplateRef.Name
	out.Spec.UpdateStrategy = convertPtr(in.Spec.UpdateStrategy, func(s *extv1beta1.SandboxWarmPoolUpdateStrategy) extv1alpha1.SandboxWarmPoolUpdateStrategy {
		return extv1alpha1.SandboxWarmPoolUpdateStrategy{Type: extv1alpha1.SandboxWarmPoolUpdateStrategyType(s.Type)}
	})
	out.Status = extv1alpha1.SandboxWarmPoolStatus{Replicas: in.Status.Replicas, ReadyReplicas: in.Status.ReadyReplicas, Selector: in.Status.Selector}
	return out
}

func poolReplicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
