package render

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Claim Ready reasons upstream writes. They are the contract of claim status.
const (
	ReasonTemplateNotFound          = "TemplateNotFound"
	ReasonWarmPoolNotFound          = "WarmPoolNotFound"
	ReasonInvalidMetadata           = "InvalidMetadata"
	ReasonEnvVarsInjectionRejected  = "EnvVarsInjectionRejected"
	ReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"
	ReasonReconcilerError           = agentsv1beta1.ReasonReconcilerError
	reasonSandboxMissing            = "SandboxMissing"
	reasonSandboxNotReady           = "SandboxNotReady"
)

// ClaimError is why a claim cannot have its Sandbox. Reason and ConditionMessage are exactly the
// Ready condition upstream writes for it; Field points at what to fix, in the claim.
type ClaimError struct {
	Reason string
	// Err is upstream's error text.
	Err string
	// Field is the offending field of the claim.
	Field *field.Path
	// Value is the offending value, if any.
	Value any
}

func (e *ClaimError) Error() string { return e.Err }

// ConditionMessage is the Ready message upstream writes: the error, prefixed "Error seen: " for
// the generic ReconcilerError reason.
func (e *ClaimError) ConditionMessage() string {
	if e.Reason == ReasonReconcilerError {
		return "Error seen: " + e.Err
	}
	return e.Err
}

// Retried reports whether a controller looks at the claim again without a change to it, as
// upstream does: a missing pool or template, a name conflict and other reconciler errors can
// clear on their own; a claim upstream calls wrong (its metadata, env or volume claim templates
// refused) waits for the claim to change.
func (e *ClaimError) Retried() bool {
	switch e.Reason {
	case ReasonInvalidMetadata, ReasonEnvVarsInjectionRejected, ReasonVolumeClaimTemplatesError:
		return false
	}
	return true
}

// FieldError turns the claim error into a field error for a render that fails on it.
func (e *ClaimError) FieldError() *field.Error {
	detail := e.Reason + ": " + e.Err
	switch e.Reason {
	case ReasonTemplateNotFound, ReasonWarmPoolNotFound:
		fe := field.NotFound(e.Field, e.Value)
		fe.Detail = detail
		return fe
	}
	if e.Value == nil {
		return field.Forbidden(e.Field, detail)
	}
	return field.Invalid(e.Field, e.Value, detail)
}

// Upstream's error texts.
const (
	errEnvRejected      = "environment variable injection rejected"
	errVCTDisallowed    = "volume claim templates are disallowed by the template"
	errVCTOverride      = "overriding volume claim templates is forbidden by the template"
	errVCTInvalid       = "invalid volume claim templates"
	autoscalerSafeEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// restrictedAnnotationDomains may not be used by claims' additionalPodMetadata annotations.
var restrictedAnnotationDomains = []string{"kubernetes.io", "k8s.io", "agents.x-k8s.io"}

// ClaimPool is the pool a claim draws from and the template it resolves to; either may be nil when
// it does not exist.
type ClaimPool struct {
	Pool     *extv1beta1.SandboxWarmPool
	Template *extv1beta1.SandboxTemplate
}

// ResolveClaim finds a claim's pool and template among the given ones (same namespace). A v1alpha1
// claim with the "none" or "default" policy converts to shadow-pool-<template>, the pool upstream's
// migration guide bootstraps; when no such pool is given, the template it names is used directly.
func ResolveClaim(claim *extv1beta1.SandboxClaim, pools []*extv1beta1.SandboxWarmPool, templates []*extv1beta1.SandboxTemplate) ClaimPool {
	var cp ClaimPool
	poolName := claim.Spec.WarmPoolRef.Name
	for _, p := range pools {
		if p.Namespace == claim.Namespace && p.Name == poolName {
			cp.Pool = p
		}
	}
	templateName := ""
	switch {
	case cp.Pool != nil:
		templateName = cp.Pool.Spec.TemplateRef.Name
	case strings.HasPrefix(poolName, shadowPoolPrefix):
		templateName = strings.TrimPrefix(poolName, shadowPoolPrefix)
		cp.Pool = &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: claim.Namespace}}
		cp.Pool.Spec.TemplateRef.Name = templateName
	}
	for _, t := range templates {
		if t.Namespace == claim.Namespace && t.Name == templateName {
			cp.Template = t
		}
	}
	return cp
}

const shadowPoolPrefix = "shadow-pool-"

// ShadowPoolName is the pool v1alpha1 claims of a template without a pool of their own name
// (ResolveClaim): a controller wakes those claims when the template changes.
func ShadowPoolName(template string) string { return shadowPoolPrefix + template }

// ClaimSandbox is the Sandbox upstream creates for a claim on the cold path (no warm Sandbox
// adopted): named after the claim, labelled with the claim's identity and the template-ref hash,
// the template's blueprint with the claim's volume claim templates merged, its labels and
// annotations, its environment injected, and the secure pod defaults. The claim's lifecycle is not
// copied: the claim enforces it. A GitOps render always renders this path: at rest, a claim is one
// Sandbox besides the pool's members, whichever path upstream took.
func ClaimSandbox(claim *extv1beta1.SandboxClaim, cp ClaimPool, opts Options) (*agentsv1beta1.Sandbox, *ClaimError) {
	if err := validateAdditionalPodMetadata(&claim.Spec.AdditionalPodMetadata, opts); err != nil {
		return nil, err
	}
	if cp.Pool == nil {
		return nil, &ClaimError{Reason: ReasonWarmPoolNotFound, Err: fmt.Sprintf("SandboxWarmPool %q not found", claim.Spec.WarmPoolRef.Name),
			Field: field.NewPath("spec", "warmPoolRef", "name"), Value: claim.Spec.WarmPoolRef.Name}
	}
	t := cp.Template
	if t == nil {
		return nil, &ClaimError{Reason: ReasonTemplateNotFound, Err: fmt.Sprintf("SandboxTemplate %q not found", cp.Pool.Spec.TemplateRef.Name),
			Field: field.NewPath("spec", "warmPoolRef", "name"), Value: claim.Spec.WarmPoolRef.Name}
	}

	sb := &agentsv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:            claim.Name,
			Namespace:       claim.Namespace,
			Annotations:     map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: t.Name},
			OwnerReferences: controllerRef(extv1beta1.GroupVersion, extv1beta1.SandboxClaimKind, claim),
		},
	}
	if tc, ok := claim.Annotations[agentsv1beta1.TraceContextAnnotation]; ok {
		sb.Annotations[agentsv1beta1.TraceContextAnnotation] = tc
	}
	sb.Spec.SandboxBlueprint = *t.Spec.SandboxBlueprint.DeepCopy()
	vcts, err := mergeVolumeClaimTemplates(t.Spec.VolumeClaimTemplates, claim.Spec.VolumeClaimTemplates, t.Spec.VolumeClaimTemplatesPolicy)
	if err != nil {
		return nil, err
	}
	sb.Spec.VolumeClaimTemplates = vcts

	refHash := NameHash(t.Name)
	sb.Labels = claimIdentityLabels(nil, claim)
	sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] = agentsv1beta1.SandboxLaunchTypeCold
	sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	md := &sb.Spec.PodTemplate.ObjectMeta
	md.Labels = claimIdentityLabels(md.Labels, claim)
	md.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	if err := mergePodMetadata(md, &claim.Spec.AdditionalPodMetadata); err != nil {
		return nil, err
	}
	if err := injectEnv(&sb.Spec.PodTemplate.Spec, claim.Spec.Env, t.Spec.EnvVarsInjectionPolicy); err != nil {
		return nil, err
	}
	expectedPodSpec(t, &sb.Spec.PodTemplate.Spec, opts)
	return sb, nil
}

// claimIdentityLabels sets the claim-uid label and the claim's created-by (verbatim; deleted
// when the claim has none). Upstream writes claim-uid even when empty; a GitOps render knows no
// UID, so the label is left out then.
func claimIdentityLabels(labels map[string]string, claim *extv1beta1.SandboxClaim) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	if claim.UID != "" {
		labels[extv1beta1.SandboxIDLabel] = string(claim.UID)
	}
	if v := claim.Labels[agentsv1beta1.CreatedByLabel]; v != "" {
		labels[agentsv1beta1.CreatedByLabel] = v
	} else {
		delete(labels, agentsv1beta1.CreatedByLabel)
	}
	return labels
}

// validateAdditionalPodMetadata applies upstream's rules to a claim's extra pod metadata: keys are
// qualified names; the router label app=sandbox-router is refused; labels need a domain prefix
// equal to or under an allowed domain and valid values; annotations may not use the Kubernetes
// or agent-sandbox domains, except the autoscaler's safe-to-evict. Keys are checked in order
// (labels, then annotations), so the error reported is always the same one.
func validateAdditionalPodMetadata(md *agentsv1beta1.PodMetadata, opts Options) *ClaimError {
	base := field.NewPath("spec", "additionalPodMetadata")
	check := func(key, value string, isLabel bool) error {
		kind := "annotation"
		if isLabel {
			kind = "label"
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Errorf("invalid %s key: %q: %s", kind, key, strings.Join(errs, "; "))
		}
		if isLabel && strings.EqualFold(key, "app") && strings.EqualFold(value, "sandbox-router") {
			return fmt.Errorf("restricted system label value: %q=%q is not allowed in AdditionalPodMetadata", key, value)
		}
		domain := ""
		if i := strings.IndexByte(key, '/'); i >= 0 {
			domain = strings.ToLower(key[:i])
		} else if isLabel {
			return fmt.Errorf("label %q must have a domain prefix (e.g. 'sandbox.users.io/my-label') to prevent opting into unintended policy domains", key)
		}
		if isLabel {
			if !slices.ContainsFunc(opts.allowedLabelDomains(), func(d string) bool { return underDomain(domain, d) }) {
				return fmt.Errorf("label domain %q is not in the allowlist", domain)
			}
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				return fmt.Errorf("invalid label value: %q does not match allowed pattern: %s", value, strings.Join(errs, "; "))
			}
		} else if slices.ContainsFunc(restrictedAnnotationDomains, func(d string) bool { return underDomain(domain, d) }) && key != autoscalerSafeEvict {
			return fmt.Errorf("restricted system domain: %q is not allowed in AdditionalPodMetadata", key)
		}
		return nil
	}
	for _, k := range sortedMapKeys(md.Labels) {
		if err := check(k, md.Labels[k], true); err != nil {
			return &ClaimError{Reason: ReasonInvalidMetadata, Field: base.Child("labels").Key(k), Value: md.Labels[k],
				Err: fmt.Sprintf("invalid additionalPodMetadata: failed to validate label %q: %v", k, err)}
		}
	}
	for _, k := range sortedMapKeys(md.Annotations) {
		if err := check(k, md.Annotations[k], false); err != nil {
			return &ClaimError{Reason: ReasonInvalidMetadata, Field: base.Child("annotations").Key(k), Value: md.Annotations[k],
				Err: fmt.Sprintf("invalid additionalPodMetadata: failed to validate annotation %q: %v", k, err)}
		}
	}
	return nil
}

func underDomain(domain, d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) }

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// mergePodMetadata adds a claim's labels and annotations to the template's pod metadata. A key the
// template already has with another value is a conflict (upstream reports it as a plain
// ReconcilerError).
func mergePodMetadata(into, claim *agentsv1beta1.PodMetadata) *ClaimError {
	base := field.NewPath("spec", "additionalPodMetadata")
	for _, k := range sortedMapKeys(claim.Labels) {
		if tv, ok := into.Labels[k]; ok && tv != claim.Labels[k] {
			return &ClaimError{Reason: ReasonReconcilerError, Field: base.Child("labels").Key(k), Value: claim.Labels[k],
				Err: fmt.Sprintf("metadata override conflict: label %q is defined in template with value %q, but claim requests %q", k, tv, claim.Labels[k])}
		}
	}
	for _, k := range sortedMapKeys(claim.Annotations) {
		if tv, ok := into.Annotations[k]; ok && tv != claim.Annotations[k] {
			return &ClaimError{Reason: ReasonReconcilerError, Field: base.Child("annotations").Key(k), Value: claim.Annotations[k],
				Err: fmt.Sprintf("metadata override conflict: annotation %q is defined in template with value %q, but claim requests %q", k, tv, claim.Annotations[k])}
		}
	}
	if len(claim.Labels) > 0 {
		if into.Labels == nil {
			into.Labels = map[string]string{}
		}
		for k, v := range claim.Labels {
			into.Labels[k] = v
		}
	}
	if len(claim.Annotations) > 0 {
		if into.Annotations == nil {
			into.Annotations = map[string]string{}
		}
		for k, v := range claim.Annotations {
			into.Annotations[k] = v
		}
	}
	return nil
}

// injectEnv applies a claim's environment under the template's policy, as upstream does:
// injection needs Allowed or Overrides; entries without a containerName go to the first regular
// container after the ones aimed at it; every named container must exist; init containers come
// first; Allowed refuses containers with envFrom (it could not tell an override) and refuses to
// replace a variable; Overrides replaces one in place with a plain value.
func injectEnv(spec *corev1.PodSpec, env []extv1beta1.EnvVar, policy extv1beta1.EnvVarsInjectionPolicy) *ClaimError {
	if len(env) == 0 {
		return nil
	}
	envPath := field.NewPath("spec", "env")
	if policy != extv1beta1.EnvVarsInjectionPolicyAllowed && policy != extv1beta1.EnvVarsInjectionPolicyOverrides {
		return &ClaimError{Reason: ReasonEnvVarsInjectionRejected, Field: envPath,
			Err: errEnvRejected + ": environment variable injection is not allowed by the template policy"}
	}
	type target struct {
		env   extv1beta1.EnvVar
		index int
	}
	byContainer := map[string][]target{}
	var defaults []target
	for i, e := range env {
		if e.ContainerName == "" {
			defaults = append(defaults, target{e, i})
		} else {
			byContainer[e.ContainerName] = append(byContainer[e.ContainerName], target{e, i})
		}
	}
	exists := map[string]bool{}
	for _, c := range spec.InitContainers {
		exists[c.Name] = true
	}
	for _, c := range spec.Containers {
		exists[c.Name] = true
	}
	for i, e := range env {
		if e.ContainerName != "" && !exists[e.ContainerName] {
			return &ClaimError{Reason: ReasonReconcilerError, Field: envPath.Index(i).Child("containerName"), Value: e.ContainerName,
				Err: fmt.Sprintf("target container %q not found in template for environment variable %q", e.ContainerName, e.Name)}
		}
	}
	inject := func(c *corev1.Container, targets []target) *ClaimError {
		if policy == extv1beta1.EnvVarsInjectionPolicyAllowed && len(c.EnvFrom) > 0 {
			return &ClaimError{Reason: ReasonEnvVarsInjectionRejected, Field: envPath.Index(targets[0].index),
				Err: fmt.Sprintf("%s: container %q uses EnvFrom sources; Allowed policy cannot safely prevent overriding EnvFrom-provided variables", errEnvRejected, c.Name)}
		}
		for _, t := range targets {
			i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == t.env.Name })
			switch {
			case i < 0:
				c.Env = append(c.Env, podEnvVar(t.env))
			case policy != extv1beta1.EnvVarsInjectionPolicyOverrides:
				return &ClaimError{Reason: ReasonReconcilerError, Field: envPath.Index(t.index).Child("name"), Value: t.env.Name,
					Err: fmt.Sprintf("environment variable override is not allowed by the template policy for variable %q", t.env.Name)}
			default:
				c.Env[i] = podEnvVar(t.env)
			}
		}
		return nil
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if targets := byContainer[c.Name]; len(targets) > 0 {
			if err := inject(c, targets); err != nil {
				return err
			}
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		targets := slices.Clone(byContainer[c.Name])
		if i == 0 {
			targets = append(targets, defaults...)
		}
		if len(targets) > 0 {
			if err := inject(c, targets); err != nil {
				return err
			}
		}
	}
	return nil
}

// podEnvVar is the container env entry a claim's variable becomes: its literal value, or its
// Secret or ConfigMap reference copied as it is (the render never reads what it points at). An
// Overrides replacement is the same entry, so a template's valueFrom is dropped for a literal, and
// a literal for a reference.
func podEnvVar(e extv1beta1.EnvVar) corev1.EnvVar {
	v := corev1.EnvVar{Name: e.Name}
	if e.Value != nil {
		v.Value = *e.Value
	}
	if src := e.ValueFrom; src != nil {
		v.ValueFrom = &corev1.EnvVarSource{
			SecretKeyRef:    src.SecretKeyRef.DeepCopy(),
			ConfigMapKeyRef: src.ConfigMapKeyRef.DeepCopy(),
		}
	}
	return v
}

// mergeVolumeClaimTemplates merges a claim's volume claim templates into the template's under its
// policy: Disallowed refuses them; Allowed appends them but refuses a name the template uses;
// Overrides replaces same-named ones in place and appends the rest. Both lists must have unique,
// non-empty names.
func mergeVolumeClaimTemplates(tmpl, claim []agentsv1beta1.PersistentVolumeClaimTemplate, policy extv1beta1.VolumeClaimTemplatesPolicy) ([]agentsv1beta1.PersistentVolumeClaimTemplate, *ClaimError) {
	vctErr := func(path *field.Path, value any, format string, args ...any) *ClaimError {
		return &ClaimError{Reason: ReasonVolumeClaimTemplatesError, Field: path, Value: value, Err: fmt.Sprintf(format, args...)}
	}
	claimPath := field.NewPath("spec", "volumeClaimTemplates")
	if len(claim) == 0 {
		if i, msg := invalidVCTNames(tmpl); msg != "" {
			// The template's own list; a template a render validated never gets here.
			return nil, vctErr(field.NewPath("spec", "warmPoolRef", "name"), i, "invalid volume claim templates in template: %s: %s", errVCTInvalid, msg)
		}
		return slices.Clone(tmpl), nil
	}
	if _, msg := invalidVCTNames(tmpl); msg != "" {
		return nil, vctErr(field.NewPath("spec", "warmPoolRef", "name"), nil, "failed to merge volume claim templates: template: %s: %s", errVCTInvalid, msg)
	}
	if i, msg := invalidVCTNames(claim); msg != "" {
		return nil, vctErr(claimPath.Index(i).Child("metadata", "name"), claim[i].Name, "failed to merge volume claim templates: claim: %s: %s", errVCTInvalid, msg)
	}
	inTemplate := map[string]bool{}
	for _, v := range tmpl {
		inTemplate[v.Name] = true
	}
	switch policy {
	case extv1beta1.VolumeClaimTemplatesPolicyAllowed:
		for i, v := range claim {
			if inTemplate[v.Name] {
				return nil, vctErr(claimPath.Index(i).Child("metadata", "name"), v.Name,
					"failed to merge volume claim templates: %s: cannot override template volume %q", errVCTOverride, v.Name)
			}
		}
		return append(slices.Clone(tmpl), claim...), nil
	case extv1beta1.VolumeClaimTemplatesPolicyOverrides:
		byName := map[string]agentsv1beta1.PersistentVolumeClaimTemplate{}
		for _, v := range claim {
			byName[v.Name] = v
		}
		out := make([]agentsv1beta1.PersistentVolumeClaimTemplate, 0, len(tmpl)+len(claim))
		for _, v := range tmpl {
			if o, ok := byName[v.Name]; ok {
				out = append(out, o)
			} else {
				out = append(out, v)
			}
		}
		for _, v := range claim {
			if !inTemplate[v.Name] {
				out = append(out, v)
			}
		}
		return out, nil
	default:
		return nil, vctErr(claimPath, nil, "failed to merge volume claim templates: %s", errVCTDisallowed)
	}
}

// invalidVCTNames returns the index and upstream's message for the first empty or repeated name.
func invalidVCTNames(vcts []agentsv1beta1.PersistentVolumeClaimTemplate) (int, string) {
	seen := map[string]bool{}
	for i, v := range vcts {
		if v.Name == "" {
			return i, fmt.Sprintf("name at index %d is empty", i)
		}
		if seen[v.Name] {
			return i, fmt.Sprintf("duplicate name %q", v.Name)
		}
		seen[v.Name] = true
	}
	return -1, ""
}
