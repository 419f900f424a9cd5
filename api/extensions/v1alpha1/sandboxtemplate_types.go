package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
)

// NetworkPolicyManagement says whether the template's NetworkPolicy is rendered.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

// EnvVarsInjectionPolicy says whether claims may add or override environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

// NetworkPolicySpec holds custom rules; nil means the secure default, {} means deny all.
type NetworkPolicySpec struct {
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is the v1alpha1 template: no volumeClaimTemplatesPolicy.
type SandboxTemplateSpec struct {
	// +required
	PodTemplate agentsv1alpha1.PodTemplate `json:"podTemplate"`
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []agentsv1alpha1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`
	// +optional
	Service *bool `json:"service,omitempty"`
}

// SandboxTemplate is the deprecated v1alpha1 form of a SandboxTemplate.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxtemplate
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxTemplate instead"
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of v1alpha1 SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxTemplate{}, &SandboxTemplateList{})
}
