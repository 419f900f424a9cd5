package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// Claim reasons and keys upstream writes.
const (
	ClaimExpiredReason = "ClaimExpired"

	// AssignedSandboxNameAnnotation records, on a claim, the warm Sandbox it adopted.
	AssignedSandboxNameAnnotation = "agents.x-k8s.io/sandbox-name"
)

// ShutdownPolicy says what happens to an expired claim.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

// Claim shutdown policies.
const (
	ShutdownPolicyDelete           ShutdownPolicy = "Delete"
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	ShutdownPolicyRetain           ShutdownPolicy = "Retain"
)

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

// SandboxWarmPoolRef names the pool a claim draws from.
type SandboxWarmPoolRef struct {
	// +required
	Name string `json:"name"`
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

// SandboxClaimSpec asks for one Sandbox from a warm pool.
type SandboxClaimSpec struct {
	// +required
	WarmPoolRef SandboxWarmPoolRef `json:"warmPoolRef"`

	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// Left out when empty (omitzero), so that a claim read back through the conversion webhook
	// is what was written, with no additionalPodMetadata: {} for a GitOps diff to show.
	// +optional
	AdditionalPodMetadata agentsv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty,omitzero"`

	// +listType=atomic
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// +optional
	// +listType=atomic
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
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

// SandboxClaim is a request for a Sandbox made from a warm pool's template.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxclaim
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Sandbox",type="string",JSONPath=".status.sandbox.name"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec SandboxClaimSpec `json:"spec"`
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty,omitzero"`
}

// SandboxClaimList is a list of SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxClaim{}, &SandboxClaimList{})
}
