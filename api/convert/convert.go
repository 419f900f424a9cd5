// Package convert converts agent-sandbox objects between the deprecated v1alpha1 API and its
// v1beta1 hub, following upstream's rules (api/v1alpha1/*_conversion.go upstream). It is pure: no
// client, no webhook.
//
// It is the one home of the conversion rules. The conversion webhook and the render's edge
// (manifest.Decode) convert typed objects with its *ToHub and *FromHub pairs; package migrate,
// which makes the same conversion as edits of YAML text (so that comments and quoting survive),
// asks it each rule that decides a value: which objects convert (IsV1alpha1), a Sandbox's
// operating mode (OperatingMode), a claim's pool (ClaimWarmPool) and the annotations. migrate
// keeps only what is about text: where a value goes in a document, and what cannot be written.
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
	"strings"

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

// IsV1alpha1 reports whether an apiVersion is one of the two v1alpha1 agent-sandbox groups, the
// objects a conversion to v1beta1 changes.
func IsV1alpha1(apiVersion string) bool {
	return apiVersion == agentsv1alpha1.GroupVersion.String() || apiVersion == extv1alpha1.GroupVersion.String()
}

// Sandbox converts a v1alpha1 Sandbox: replicas 0 becomes operatingMode Suspended, anything else
// (including unset) Running.
func Sandbox(in *agentsv1alpha1.Sandbox) *agentsv1beta1.Sandbox {
	out := &agentsv1beta1.Sandbox{TypeMeta: typeMeta(agentsv1beta1.GroupVersion, agentsv1beta1.SandboxKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.SandboxBlueprint = blueprint(&in.Spec.PodTemplate, in.Spec.VolumeClaimTemplates, in.Spec.Service)
	out.Spec.ShutdownTime = in.Spec.ShutdownTime.DeepCopy()
	out.Spec.ShutdownPolicy = (*agentsv1beta1.ShutdownPolicy)(clone(in.Spec.ShutdownPolicy))
	out.Spec.OperatingMode = OperatingMode(in.Spec.Replicas)
	st := in.Status.DeepCopy() // all but replicas, which v1beta1 does not hold
	out.Status = agentsv1beta1.SandboxStatus{ServiceFQDN: st.ServiceFQDN, Service: st.Service, Conditions: st.Conditions, LabelSelector: st.LabelSelector, PodIPs: st.PodIPs}
	return out
}

// OperatingMode is upstream's reading of a v1alpha1 Sandbox's replicas: 0 is Suspended, anything
// else (including unset) Running.
func OperatingMode(replicas *int32) agentsv1beta1.SandboxOperatingMode {
	if replicas != nil && *replicas == 0 {
		return agentsv1beta1.SandboxOperatingModeSuspended
	}
	return agentsv1beta1.SandboxOperatingModeRunning
}

// SandboxTemplate converts a v1alpha1 template. volumeClaimTemplatesPolicy comes from upstream's
// round-trip annotation when it is present and not empty, and is otherwise left for defaulting
// (Disallowed). An empty annotation stays an annotation, so that it converts back as it was.
func SandboxTemplate(in *extv1alpha1.SandboxTemplate) *extv1beta1.SandboxTemplate {
	out := &extv1beta1.SandboxTemplate{TypeMeta: typeMeta(extv1beta1.GroupVersion, extv1beta1.SandboxTemplateKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.SandboxBlueprint = blueprint(&in.Spec.PodTemplate, in.Spec.VolumeClaimTemplates, in.Spec.Service)
	out.Spec.NetworkPolicy = (*extv1beta1.NetworkPolicySpec)(in.Spec.NetworkPolicy.DeepCopy())
	out.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagement(in.Spec.NetworkPolicyManagement)
	out.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy)
	if p := out.Annotations[VolumeClaimTemplatesPolicyAnnotation]; p != "" {
		out.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesPolicy(p)
		dropAnnotation(&out.ObjectMeta, VolumeClaimTemplatesPolicyAnnotation)
	}
	return out
}

// blueprint converts what a v1alpha1 Sandbox and template share, which v1beta1 gathers into its
// SandboxBlueprint.
func blueprint(pt *agentsv1alpha1.PodTemplate, vcts []agentsv1alpha1.PersistentVolumeClaimTemplate, service *bool) agentsv1beta1.SandboxBlueprint {
	c := pt.DeepCopy()
	return agentsv1beta1.SandboxBlueprint{
		PodTemplate:          agentsv1beta1.PodTemplate{Spec: c.Spec, ObjectMeta: agentsv1beta1.PodMetadata(c.ObjectMeta)},
		VolumeClaimTemplates: convertEach(vcts, volumeClaimTemplate),
		Service:              clone(service),
	}
}

// volumeClaimTemplate converts one volume claim template; its metadata has the same shape in both
// versions.
func volumeClaimTemplate(in *agentsv1alpha1.PersistentVolumeClaimTemplate) agentsv1beta1.PersistentVolumeClaimTemplate {
	c := in.DeepCopy()
	return agentsv1beta1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata(c.EmbeddedObjectMetadata), Spec: c.Spec}
}

// SandboxClaim converts a v1alpha1 claim. v1beta1 claims always name a warm pool:
//   - warmpool: <pool> names that pool;
//   - warmpool: none or default, with a warm-adopted Sandbox in status (its name differs from the
//     claim's), names the pool that Sandbox came from: its name minus the last "-suffix";
//   - otherwise shadow-pool-<template>, the pool upstream's migration guide bootstraps.
func SandboxClaim(in *extv1alpha1.SandboxClaim) *extv1beta1.SandboxClaim {
	out := &extv1beta1.SandboxClaim{TypeMeta: typeMeta(extv1beta1.GroupVersion, extv1beta1.SandboxClaimKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.WarmPoolRef.Name = claimPoolName(in)
	out.Spec.Lifecycle = convertPtr(in.Spec.Lifecycle, claimLifecycle)
	out.Spec.AdditionalPodMetadata = agentsv1beta1.PodMetadata(*in.Spec.AdditionalPodMetadata.DeepCopy())
	if len(in.Spec.Env) > 0 { // an empty list converts to none
		out.Spec.Env = convertEach(in.Spec.Env, envVar)
	}
	st := in.Status.DeepCopy()
	out.Status = extv1beta1.SandboxClaimStatus{Conditions: st.Conditions, SandboxStatus: extv1beta1.SandboxStatus(st.SandboxStatus)}
	return out
}

func claimPoolName(in *extv1alpha1.SandboxClaim) string {
	var policy string
	if in.Spec.WarmPool != nil {
		policy = string(*in.Spec.WarmPool)
	}
	return ClaimWarmPool(policy, in.Spec.TemplateRef.Name, in.Name, in.Status.SandboxStatus.Name)
}

// ClaimWarmPool is the pool the v1beta1 form of a v1alpha1 claim names, from what the claim
// writes: its warm pool policy ("" when unset), its template, its own name and the Sandbox its
// status names ("" when none). A policy naming a pool is that pool; otherwise a warm-adopted
// Sandbox (its name differs from the claim's) came from the pool its name is without the last
// "-suffix"; otherwise it is shadow-pool-<template>, the pool upstream's migration guide
// bootstraps.
func ClaimWarmPool(policy, template, claim, sandbox string) string {
	if extv1alpha1.WarmPoolPolicy(policy).IsSpecificPool() {
		return policy
	}
	if sandbox != "" && sandbox != claim {
		if i := strings.LastIndexByte(sandbox, '-'); i > 0 {
			return sandbox[:i]
		}
	}
	return ShadowPoolPrefix + template
}

// claimLifecycle converts a claim's lifecycle, field for field.
func claimLifecycle(in *extv1alpha1.Lifecycle) extv1beta1.Lifecycle {
	c := in.DeepCopy()
	return extv1beta1.Lifecycle{
		ShutdownTime: c.ShutdownTime, TTLSecondsAfterFinished: c.TTLSecondsAfterFinished, ShutdownPolicy: extv1beta1.ShutdownPolicy(c.ShutdownPolicy),
	}
}

// envVar converts a claim's env entry; its Secret or ConfigMap reference has the same shape in
// both versions.
func envVar(in *extv1alpha1.EnvVar) extv1beta1.EnvVar {
	c := in.DeepCopy()
	return extv1beta1.EnvVar{Name: c.Name, Value: c.Value, ValueFrom: (*extv1beta1.EnvVarSource)(c.ValueFrom), ContainerName: c.ContainerName}
}

// SandboxWarmPool converts a v1alpha1 pool; its required replicas becomes the optional pointer.
func SandboxWarmPool(in *extv1alpha1.SandboxWarmPool) *extv1beta1.SandboxWarmPool {
	out := &extv1beta1.SandboxWarmPool{TypeMeta: typeMeta(extv1beta1.GroupVersion, extv1beta1.SandboxWarmPoolKind), ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Spec.Replicas = clone(&in.Spec.Replicas)
	out.Spec.TemplateRef.Name = in.Spec.TemplateRef.Name
	out.Spec.UpdateStrategy = convertPtr(in.Spec.UpdateStrategy, func(s *extv1alpha1.SandboxWarmPoolUpdateStrategy) extv1beta1.SandboxWarmPoolUpdateStrategy {
		return extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.SandboxWarmPoolUpdateStrategyType(s.Type)}
	})
	out.Status = extv1beta1.SandboxWarmPoolStatus{Replicas: in.Status.Replicas, ReadyReplicas: in.Status.ReadyReplicas, Selector: in.Status.Selector}
	return out
}
