package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodMetadata is the subset of object metadata a pod template may carry.
type PodMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the metadata of a volume claim template.
type EmbeddedObjectMetadata struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the Pod of a Sandbox.
type PodTemplate struct {
	// +required
	Spec corev1.PodSpec `json:"spec"`
	// +optional
	ObjectMeta PodMetadata `json:"metadata"`
}

// PersistentVolumeClaimTemplate describes one PVC created for a Sandbox.
type PersistentVolumeClaimTemplate struct {
	// +optional
	EmbeddedObjectMetadata `json:"metadata"`
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxSpec is the v1alpha1 desired state: replicas 0 means suspended.
type SandboxSpec struct {
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// +optional
	Lifecycle `json:",inline"`

	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// +optional
	Service *bool `json:"service,omitempty"`
}

// ShutdownPolicy says what happens to an expired Sandbox.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

// Shutdown policies.
const (
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle bounds the life of a Sandbox.
type Lifecycle struct {
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxStatus is the v1alpha1 observed state.
type SandboxStatus struct {
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`
	// +optional
	Service string `json:"service,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	LabelSelector string `json:"selector,omitempty"`
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// Sandbox is the deprecated v1alpha1 form of a Sandbox.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=sandbox
// +kubebuilder:deprecatedversion:warning="agents.x-k8s.io/v1alpha1 Sandbox is deprecated; use agents.x-k8s.io/v1beta1 Sandbox instead"
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +required
	Spec SandboxSpec `json:"spec"`
	// +optional
	Status SandboxStatus `json:"status,omitempty,omitzero"`
}

// SandboxList is a list of v1alpha1 Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Sandbox{}, &SandboxList{})
}
