package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConditionReady is the condition saying whether a SandboxRender is the one in force in its
// namespace.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonInForce: the controller renders the namespace with this object's generation.
	ReasonInForce = "InForce"
	// ReasonInvalid: the spec fails validation; the message names the field.
	ReasonInvalid = "Invalid"
	// ReasonConflict: another SandboxRender in the namespace; neither is in force.
	ReasonConflict = "Conflict"
)

// SandboxRenderStatus says which generation of the config is in force.
type SandboxRenderStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when the controller renders the namespace with this object.
	// When False, the objects of the namespace keep their last good render.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxRender is the render's configuration for the agent-sandbox objects of its namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbr
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SandboxRender struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the functionConfig's spec (see docs/gitops.md). The function-only knobs (mode,
	// keepSources, keepSourceVersions, now, resources) have no effect in the cluster.
	// +optional
	Spec runtime.RawExtension `json:"spec,omitempty"`
	// +optional
	Status SandboxRenderStatus `json:"status,omitempty"`
}

// SandboxRenderList is a list of SandboxRenders.
// +kubebuilder:object:root=true
type SandboxRenderList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxRender `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxRender{}, &SandboxRenderList{})
}
