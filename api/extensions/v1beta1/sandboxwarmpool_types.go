package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
// +kubebuilder:validation:Enum=Recreate;OnReplenish;RollingUpdate
type SandboxWarmPoolUpdateStrategyType string

// Update strategies.
const (
	RecreateSandboxWarmPoolUpdateStrategyType    SandboxWarmPoolUpdateStrategyType = "Recreate"
	OnReplenishSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "OnReplenish"
	// RollingUpdateSandboxWarmPoolUpdateStrategyType replaces stale idle members a few at a
	// time, as a Deployment replaces Pods (see SandboxWarmPoolRollingUpdate). An extension:
	// upstream's enum has no such value, and its CRD would refuse it.
	RollingUpdateSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "RollingUpdate"
)

// SandboxWarmPoolUpdateStrategy configures how template changes reach pool members.
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || (has(self.type) && self.type == 'RollingUpdate')",message="rollingUpdate may be set only when type is RollingUpdate"
type SandboxWarmPoolUpdateStrategy struct {
	// +kubebuilder:default=OnReplenish
	// +optional
	Type SandboxWarmPoolUpdateStrategyType `json:"type,omitempty"`

	// RollingUpdate bounds a RollingUpdate: how many members above spec.replicas may exist and
	// how many of spec.replicas may be not Ready while stale members are replaced. Only with
	// type RollingUpdate, as a Deployment's rollingUpdate only with its type RollingUpdate. An
	// extension: upstream has no such field, and its CRD would prune it.
	// +optional
	RollingUpdate *SandboxWarmPoolRollingUpdate `json:"rollingUpdate,omitempty"`
}

// SandboxWarmPoolRollingUpdate are a RollingUpdate's bounds, with a Deployment's semantics: a
// number, or a percentage of spec.replicas (maxSurge rounded up, maxUnavailable rounded down),
// not both 0. If both come to 0 after rounding (a small pool), maxUnavailable is 1, as a
// Deployment resolves them.
//
// Unset, each is 25%, a Deployment's default: a pool of 4 or more replaces a quarter of its
// members at a time, and a pool of 1 to 3 (25% unavailable rounds down to 0, 25% surge up to 1)
// surges first: it creates one updated member and retires a stale one only once that is Ready,
// so it never has fewer Ready members than spec.replicas. The defaults are applied by the
// controller, not by the CRD, so that pools written without them are stored and converted
// exactly as before.
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || !has(self.maxSurge) || !(type(self.maxUnavailable) == int ? self.maxUnavailable == 0 : self.maxUnavailable.matches('^0+%$')) || !(type(self.maxSurge) == int ? self.maxSurge == 0 : self.maxSurge.matches('^0+%$'))",message="maxUnavailable and maxSurge may not both be 0"
type SandboxWarmPoolRollingUpdate struct {
	// MaxUnavailable is how many of spec.replicas members may be not Ready while stale Ready
	// members are deleted: a number (at least 0) or a percentage of spec.replicas up to 100%,
	// rounded down. Unset means 25%. Stale members that are not Ready may always be deleted.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) != int || self >= 0",message="must be at least 0"
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^0*(100|[1-9]?[0-9])%$`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxSurge is how many members above spec.replicas may exist while stale members are
	// replaced: a number (at least 0) or a percentage of spec.replicas, rounded up. Unset means
	// 25%. Members on their way out count, as they count when a pool fills.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) != int || self >= 0",message="must be at least 0"
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^0*[0-9]{1,9}%$`
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// The bounds of a RollingUpdate when unset: a Deployment's.
const (
	DefaultRollingUpdateMaxUnavailable = "25%"
	DefaultRollingUpdateMaxSurge       = "25%"
)

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
