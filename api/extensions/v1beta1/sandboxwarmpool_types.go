package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateRef names the template a pool stamps out.
type SandboxTemplateRef struct {
	// +required
	Name string `json:"name"`
}

// SandboxWarmPoolSpec is the desired state of a pool.
type SandboxWarmPoolSpec struct {
	// Replicas is the number of idle Sandboxes to keep; unset means 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef,omitempty"`

	// +optional
	UpdateStrategy *SandboxWarmPoolUpdateStrategy `json:"updateStrategy,omitempty"`

	// ProgressDeadlineSeconds is how long a member made from the current template may exist
	// without becoming Ready before the pool's Progressing condition turns False with reason
	// ProgressDeadlineExceeded; unset means 600, as a Deployment's. It only changes what the
	// status says, never which members are kept or replaced. An extension: upstream has no such
	// field, and its CRD would prune it. The default is applied by the controller, not by the
	// CRD, so that pools written without it are stored, hashed and converted exactly as before.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// SandboxWarmPoolUpdateStrategyType says when stale pool members are replaced.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type SandboxWarmPoolUpdateStrategyType string

// Update strategies.
const (
	RecreateSandboxWarmPoolUpdateStrategyType    SandboxWarmPoolUpdateStrategyType = "Recreate"
	OnReplenishSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "OnReplenish"
)

// SandboxWarmPoolUpdateStrategy configures how template changes reach pool members.
type SandboxWarmPoolUpdateStrategy struct {
	// +kubebuilder:default=OnReplenish
	// +optional
	Type SandboxWarmPoolUpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a pool.
type SandboxWarmPoolStatus struct {
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// +optional
	Selector string `json:"selector,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The fields below are extensions: upstream's controller does not write them, and its CRD
	// would prune them.

	// UpdatedReplicas counts the active members made from the pool's current template (not stale
	// as the pool judges staleness).
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// UpdatedReadyReplicas counts the updated members whose Ready condition is True.
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`
	// Conditions are Available (at least spec.replicas members Ready) and Progressing (whether
	// the members the update strategy wants exist and are Ready yet), as a Deployment's.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Pool condition types and reasons: a Deployment's, with members for ReplicaSets.
const (
	// SandboxWarmPoolAvailable is True when at least spec.replicas members are Ready.
	SandboxWarmPoolAvailable = "Available"
	// SandboxWarmPoolProgressing is True while members the update strategy wants are created,
	// replaced or not Ready yet, and False once they all are (RolloutComplete) or when they
	// cannot be (ProgressDeadlineExceeded, TemplateNotFound).
	SandboxWarmPoolProgressing = "Progressing"

	MinimumReplicasAvailableReason   = "MinimumReplicasAvailable"
	MinimumReplicasUnavailableReason = "MinimumReplicasUnavailable"
	NewMembersCreatedReason          = "NewMembersCreated"
	MembersUpdatedReason             = "MembersUpdated"
	RolloutCompleteReason            = "RolloutComplete"
	ProgressDeadlineExceededReason   = "ProgressDeadlineExceeded"
	// PoolTemplateNotFoundReason: the pool's template does not exist, so no member is created
	// or replaced (a Deployment says ReplicaSetCreateError when it cannot create).
	PoolTemplateNotFoundReason = "TemplateNotFound"
)

// DefaultProgressDeadlineSeconds is spec.progressDeadlineSeconds when unset: a Deployment's.
const DefaultProgressDeadlineSeconds int32 = 600

// SandboxWarmPool keeps a number of pre-started Sandboxes from one template, ready for claims.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=swp
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Updated",type="integer",JSONPath=".status.updatedReplicas"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=".status.conditions[?(@.type==\"Available\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type SandboxWarmPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxWarmPool{}, &SandboxWarmPoolList{})
}
