package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind names, used in owner references and error messages.
const (
	SandboxKind = "Sandbox"
)

// Condition types and reasons upstream writes on a Sandbox. They are part of the contract with
// users, Argo CD health checks and claim controllers, so the strings never change.
const (
	ConditionSuspended    = "Suspended"
	ConditionReady        = "Ready"
	ConditionPodScheduled = "PodScheduled"
	ConditionFinished     = "Finished"

	ReasonSuspendedPodTerminated   = "PodTerminated"
	ReasonSuspendedPodTerminating  = "PodTerminating"
	ReasonSuspendedPodNotOwned     = "PodNotOwned"
	ReasonNotSuspended             = "NotSuspended"
	ReasonSuspendedPodStateUnknown = "PodStateUnknown"
	ReasonDependenciesReady        = "DependenciesReady"
	ReasonDependenciesNotReady     = "DependenciesNotReady"
	ReasonMultiplePods             = "MultiplePods"
	ReasonReconcilerError          = "ReconcilerError"
	ReasonSandboxSuspended         = "SandboxSuspended"
	ReasonPodScheduled             = "PodScheduled"
	ReasonPodSchedulingUnknown     = "PodSchedulingUnknown"
	ReasonPodSucceeded             = "PodSucceeded"
	ReasonPodFailed                = "PodFailed"
	ReasonSandboxExpired           = "SandboxExpired"
)

// Label and annotation keys upstream reads and writes. Keys under agents.x-k8s.io/ and
// extensions.agents.x-k8s.io/ are "system" keys: render never copies them from a pod template to
// a Pod, so a user cannot forge the labels that NetworkPolicies and pools select on.
const (
	SandboxNameHashLabel                   = "agents.x-k8s.io/sandbox-name-hash"
	SandboxPodNameAnnotation               = "agents.x-k8s.io/pod-name"
	SandboxTemplateRefAnnotation           = "agents.x-k8s.io/sandbox-template-ref"
	SandboxLaunchTypeLabel                 = "agents.x-k8s.io/launch-type"
	CreatedByLabel                         = "agents.x-k8s.io/created-by"
	DeprecatedSandboxPodTemplateHashLabel  = "agents.x-k8s.io/sandbox-pod-template-hash"
	SandboxTemplateHashLabel               = "agents.x-k8s.io/sandbox-template-hash"
	SandboxPropagatedLabelsAnnotation      = "agents.x-k8s.io/propagated-labels"
	SandboxPropagatedAnnotationsAnnotation = "agents.x-k8s.io/propagated-annotations"
	SandboxAdoptableLabel                  = "agents.x-k8s.io/adoptable"
	SandboxWarmPoolLabel                   = "agents.x-k8s.io/warm-pool-sandbox"
	SandboxTemplateRefHashLabel            = "agents.x-k8s.io/sandbox-template-ref-hash"
	TraceContextAnnotation                 = "opentelemetry.io/trace-context"

	SandboxLaunchTypeCold = "cold"
	SandboxLaunchTypeWarm = "warm"
)

// PodMetadata is the subset of object metadata a pod template may carry.
type PodMetadata struct {
	// Labels to put on the Pod; system keys are dropped.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to put on the Pod; system keys are dropped.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the metadata of a volume claim template.
type EmbeddedObjectMetadata struct {
	// Name of the template; the PVC is named <name>-<sandbox> and the pod volume <name>.
	// +optional
	Name string `json:"name,omitempty"`

	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the Pod of a Sandbox. Spec comes before metadata and metadata has no
// omitempty: upstream serialises it as "metadata":{} and the hashes depend on that.
type PodTemplate struct {
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// +optional
	ObjectMeta PodMetadata `json:"metadata"`
}

// PersistentVolumeClaimTemplate describes one PVC created for (and owned by) a Sandbox.
type PersistentVolumeClaimTemplate struct {
	// +optional
	EmbeddedObjectMetadata `json:"metadata"`

	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxOperatingMode says whether the Sandbox should have a running Pod.
// +kubebuilder:validation:Enum=Running;Suspended
type SandboxOperatingMode string

// Operating modes.
const (
	SandboxOperatingModeRunning   SandboxOperatingMode = "Running"
	SandboxOperatingModeSuspended SandboxOperatingMode = "Suspended"
)

// SandboxBlueprint is what a Sandbox and a SandboxTemplate share; warm pools hash it to decide
// whether a pooled Sandbox is stale.
type SandboxBlueprint struct {
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// Service: true creates a headless Service named after the Sandbox, false deletes an owned
	// one, unset keeps an existing one without creating it.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// SandboxSpec is the desired state of a Sandbox. The JSON is flat: blueprint and lifecycle are
// inlined.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="volumeClaimTemplates is immutable"
type SandboxSpec struct {
	SandboxBlueprint `json:",inline"`

	// +optional
	Lifecycle `json:",inline"`

	// +kubebuilder:default=Running
	// +optional
	OperatingMode SandboxOperatingMode `json:"operatingMode,omitempty"`
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

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// +optional
	Service string `json:"service,omitempty"`

	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	LabelSelector string `json:"selector,omitempty"`

	// +optional
	PodIPs []string `json:"podIPs,omitempty"`

	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// Sandbox is one isolated, stateful, singleton workload: a Pod, its PVCs and an optional
// headless Service.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandbox
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// +required
	Spec SandboxSpec `json:"spec"`

	// +optional
	Status SandboxStatus `json:"status,omitempty,omitzero"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Sandbox{}, &SandboxList{})
}
