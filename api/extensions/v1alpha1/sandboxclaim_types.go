package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
)

// WarmPoolPolicy is "none", "default" or the name of a specific pool.
type WarmPoolPolicy string

// The two policy words; anything else names a pool.
const (
	WarmPoolPolicyNone    WarmPoolPolicy = "none"
	WarmPoolPolicyDefault WarmPoolPolicy = "default"
)

// IsSpecificPool reports whether the policy names a pool rather than a policy word.
func (p WarmPoolPolicy) IsSpecificPool() bool {
	return p != WarmPoolPolicyNone && p != WarmPoolPolicyDefault && p != ""
}

// ShutdownPolicy says what happens to an expired claim.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

// Lifecycle bounds the life of a claim.
type Lifecycle struct {
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxTemplateRef names a template.
type SandboxTemplateRef struct {
	// +required
	Name string `json:"name,omitempty"`
}

// EnvVar is one environment variable a claim injects into its Sandbox: a literal value, or,
// as an addition to upstream's API (upstream issue #384), a reference to a key of a Secret or
// ConfigMap, so a credential stays out of the template, the claim and Git. The render copies the
// reference into the Pod; it never reads the Secret. Value is a pointer so that an explicit empty
// value stays distinct from an absent one through every conversion.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="exactly one of value and valueFrom must be set"
type EnvVar struct {
	// +required
	Name string `json:"name"`
	// +optional
	Value *string `json:"value,omitempty"`
	// +optional
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// EnvVarSource is the part of the core EnvVarSource a claim may use: a key of a Secret or of a
// ConfigMap in the claim's namespace. Field references make no sense before the Pod exists, so
// they are left out.
// +kubebuilder:validation:XValidation:rule="has(self.secretKeyRef) != has(self.configMapKeyRef)",message="exactly one of secretKeyRef and configMapKeyRef must be set"
type EnvVarSource struct {
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
}

// SandboxClaimSpec is the v1alpha1 claim: a template plus a warm pool policy.
type SandboxClaimSpec struct {
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef,omitempty"`
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	// +optional
	// +kubebuilder:default=default
	WarmPool *WarmPoolPolicy `json:"warmpool,omitempty"`
	// Left out when empty (omitzero), so that a claim read back through the conversion webhook
	// is what was written, with no additionalPodMetadata: {} for a GitOps diff to show.
	// +optional
	AdditionalPodMetadata agentsv1alpha1.PodMetadata `json:"additionalPodMetadata,omitempty,omitzero"`
	// +listType=atomic
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// SandboxClaimStatus is the observed state of a claim.
type SandboxClaimStatus struct {
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	SandboxStatus SandboxStatus `json:"sandbox,omitempty"`
}

// SandboxStatus mirrors the claimed Sandbox.
type SandboxStatus struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaim is the deprecated v1alpha1 form of a SandboxClaim.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxclaim
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxClaim is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxClaim instead"
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec SandboxClaimSpec `json:"spec"`
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty,omitzero"`
}

// SandboxClaimList is a list of v1alpha1 SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxClaim{}, &SandboxClaimList{})
}
