package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// SandboxIDLabel carries the UID of the claim a Sandbox belongs to.
const SandboxIDLabel = "agents.x-k8s.io/claim-uid"

// NetworkPolicyManagement says whether the template's NetworkPolicy is rendered.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

// Network policy management modes.
const (
	NetworkPolicyManagementManaged   NetworkPolicyManagement = "Managed"
	NetworkPolicyManagementUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy says whether claims may add or override environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

// Env injection policies.
const (
	EnvVarsInjectionPolicyAllowed    EnvVarsInjectionPolicy = "Allowed"
	EnvVarsInjectionPolicyOverrides  EnvVarsInjectionPolicy = "Overrides"
	EnvVarsInjectionPolicyDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// VolumeClaimTemplatesPolicy says whether claims may add or replace volume claim templates.
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type VolumeClaimTemplatesPolicy string

// Volume claim template policies.
const (
	VolumeClaimTemplatesPolicyDisallowed VolumeClaimTemplatesPolicy = "Disallowed"
	VolumeClaimTemplatesPolicyAllowed    VolumeClaimTemplatesPolicy = "Allowed"
	VolumeClaimTemplatesPolicyOverrides  VolumeClaimTemplatesPolicy = "Overrides"
)

// NetworkPolicySpec holds custom rules; nil means the secure default, {} means deny all.
type NetworkPolicySpec struct {
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is a reusable Sandbox blueprint plus the policies claims must respect.
type SandboxTemplateSpec struct {
	agentsv1beta1.SandboxBlueprint `json:",inline"`

	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// +kubebuilder:default=Disallowed
	// +optional
	VolumeClaimTemplatesPolicy VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// SandboxTemplate is a blueprint that warm pools and claims turn into Sandboxes.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxtemplate
// +kubebuilder:storageversion
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxTemplate{}, &SandboxTemplateList{})
}
