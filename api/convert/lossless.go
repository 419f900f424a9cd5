package convert

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// The annotations that make the webhook's conversions lossless. Each holds, as JSON, only the
// values the object's own version cannot hold, and is absent when there are none: a Sandbox
// created through v1alpha1 with replicas 1 carries nothing, unlike upstream's copy of the whole
// object. The keys are reserved: a conversion removes them from its input and writes its own.
const (
	// V1alpha1Annotation, on a v1beta1 object, keeps what its v1alpha1 form said that v1beta1
	// cannot: a claim's template and warm pool policy, a Sandbox's unset replicas.
	V1alpha1Annotation = "conversion.sandbox-gitops.dev/v1alpha1"
	// V1beta1Annotation, on a v1alpha1 object, keeps the v1beta1 fields v1alpha1 has no place for
	// (a claim's volumeClaimTemplates, a Sandbox's status.nodeName), so that an update made
	// through v1alpha1 does not erase them.
	V1beta1Annotation = "conversion.sandbox-gitops.dev/v1beta1"
)

// kept is one value the other version cannot hold, with the value its counterpart had when it
// was kept. It is restored only while the counterpart still has that value: an edit of the
// counterpart made through the other version wins over the kept value.
type kept[V, W any] struct {
	Value V `json:"value"`
	With  W `json:"with"`
}

// sandboxAlpha is what a v1alpha1 Sandbox says that v1beta1 cannot.
type sandboxAlpha struct {
	// Replicas unset, or other than 0 and 1, while operatingMode is With.
	Replicas *kept[*int32, agentsv1beta1.SandboxOperatingMode] `json:"replicas,omitempty"`
	// StatusReplicas other than the one the operating mode and status imply.
	StatusReplicas *kept[int32, agentsv1beta1.SandboxOperatingMode] `json:"statusReplicas,omitempty"`
}

// sandboxBeta is what a v1beta1 Sandbox says that v1alpha1 cannot.
type sandboxBeta struct {
	// OperatingMode other than Running and Suspended (unset), while replicas is With.
	OperatingMode *kept[agentsv1beta1.SandboxOperatingMode, *int32] `json:"operatingMode,omitempty"`
	NodeName      string                                            `json:"nodeName,omitempty"`
}

// SandboxToHub converts a v1alpha1 Sandbox to v1beta1 for the webhook, restoring what an earlier
// SandboxFromHub kept and keeping what v1beta1 cannot say.
func SandboxToHub(in *agentsv1alpha1.Sandbox) *agentsv1beta1.Sandbox {
	out := Sandbox(in)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation)
	var b sandboxBeta
	if takeAnnotation(&out.ObjectMeta, V1beta1Annotation, &b) {
		if k := b.OperatingMode; k != nil && ptr.Equal(k.With, in.Spec.Replicas) {
			out.Spec.OperatingMode = k.Value
		}
		out.Status.NodeName = b.NodeName
	}
	back := sandboxV1alpha1(out)
	var a sandboxAlpha
	if !ptr.Equal(back.Spec.Replicas, in.Spec.Replicas) {
		a.Replicas = &kept[*int32, agentsv1beta1.SandboxOperatingMode]{clone(in.Spec.Replicas), out.Spec.OperatingMode}
	}
	if back.Status.Replicas != in.Status.Replicas {
		a.StatusReplicas = &kept[int32, agentsv1beta1.SandboxOperatingMode]{in.Status.Replicas, out.Spec.OperatingMode}
	}
	putAnnotation(&out.ObjectMeta, V1alpha1Annotation, a, a != sandboxAlpha{})
	return out
}

// SandboxFromHub converts a v1beta1 Sandbox to v1alpha1 for the webhook, restoring what an
// earlier SandboxToHub kept and keeping what v1alpha1 cannot say.
func SandboxFromHub(in *agentsv1beta1.Sandbox) *agentsv1alpha1.Sandbox {
	out := sandboxV1alpha1(in)
	dropAnnotation(&out.ObjectMeta, V1beta1Annotation)
	var a sandboxAlpha
	if takeAnnotation(&out.ObjectMeta, V1alpha1Annotation, &a) {
		if k := a.Replicas; k != nil && k.With == in.Spec.OperatingMode {
			out.Spec.Replicas = clone(k.Value)
		}
		if k := a.StatusReplicas; k != nil && k.With == in.Spec.OperatingMode {
			out.Status.Replicas = k.Value
		}
	}
	forth := Sandbox(out)
	var b sandboxBeta
	if forth.Spec.OperatingMode != in.Spec.OperatingMode {
		b.OperatingMode = &kept[agentsv1beta1.SandboxOperatingMode, *int32]{in.Spec.OperatingMode, clone(out.Spec.Replicas)}
	}
	b.NodeName = in.Status.NodeName
	putAnnotation(&out.ObjectMeta, V1beta1Annotation, b, b != sandboxBeta{})
	return out
}

// SandboxTemplateToHub converts a v1alpha1 template to v1beta1 for the webhook. The one field
// v1alpha1 lacks, volumeClaimTemplatesPolicy, travels in upstream's own annotation
// (VolumeClaimTemplatesPolicyAnnotation), so objects written through upstream convert alike.
func SandboxTemplateToHub(in *extv1alpha1.SandboxTemplate) *extv1beta1.SandboxTemplate {
	out := SandboxTemplate(in)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation)
	dropAnnotation(&out.ObjectMeta, V1beta1Annotation)
	return out
}

// SandboxTemplateFromHub converts a v1beta1 template to v1alpha1 for the webhook.
func SandboxTemplateFromHub(in *extv1beta1.SandboxTemplate) *extv1alpha1.SandboxTemplate {
	out := sandboxTemplateV1alpha1(in)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation)
	dropAnnotation(&out.ObjectMeta, V1beta1Annotation)
	return out
}

// claimAlpha is what a v1alpha1 claim says that v1beta1 cannot.
type claimAlpha struct {
	// Ref is the template and policy, while warmPoolRef.name is With.
	Ref *kept[claimRef, string] `json:"ref,omitempty"`
}

// claimBeta is what a v1beta1 claim says that v1alpha1 cannot.
type claimBeta struct {
	// WarmPoolRef is a pool name that the template and policy With would not convert back to.
	WarmPoolRef          *kept[string, claimRef]                       `json:"warmPoolRef,omitempty"`
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

func (b *claimBeta) empty() bool { return b.WarmPoolRef == nil && b.VolumeClaimTemplates == nil }

// SandboxClaimToHub converts a v1alpha1 claim to v1beta1 for the webhook. A claim whose template
// and policy are not what its pool converts back to (warmpool none, a pool named apart from its
// template) keeps them, so that reading it as v1alpha1 gives what was written.
func SandboxClaimToHub(in *extv1alpha1.SandboxClaim) *extv1beta1.SandboxClaim {
	out := SandboxClaim(in)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation)
	var b claimBeta
	if takeAnnotation(&out.ObjectMeta, V1beta1Annotation, &b) {
		if k := b.WarmPoolRef; k != nil && k.With.equal(claimRefOf(in)) {
			out.Spec.WarmPoolRef.Name = k.Value
		}
		out.Spec.VolumeClaimTemplates = b.VolumeClaimTemplates
	}
	var a claimAlpha
	if ref := claimRefOf(in); !claimRefOfPool(out.Spec.WarmPoolRef.Name).equal(ref) {
		a.Ref = &kept[claimRef, string]{claimRef{ref.Template, clone(ref.WarmPool)}, out.Spec.WarmPoolRef.Name}
	}
	putAnnotation(&out.ObjectMeta, V1alpha1Annotation, a, a != claimAlpha{})
	return out
}

// SandboxClaimFromHub converts a v1beta1 claim to v1alpha1 for the webhook.
func SandboxClaimFromHub(in *extv1beta1.SandboxClaim) *extv1alpha1.SandboxClaim {
	out := sandboxClaimV1alpha1(in)
	dropAnnotation(&out.ObjectMeta, V1beta1Annotation)
	var a claimAlpha
	if takeAnnotation(&out.ObjectMeta, V1alpha1Annotation, &a) {
		if k := a.Ref; k != nil && k.With == in.Spec.WarmPoolRef.Name {
			out.Spec.TemplateRef.Name = k.Value.Template
			out.Spec.WarmPool = clone(k.Value.WarmPool)
		}
	}
	var b claimBeta
	if pool := claimPoolName(out); pool != in.Spec.WarmPoolRef.Name {
		ref := claimRefOf(out)
		b.WarmPoolRef = &kept[string, claimRef]{in.Spec.WarmPoolRef.Name, claimRef{ref.Template, clone(ref.WarmPool)}}
	}
	b.VolumeClaimTemplates = convertEach(in.Spec.VolumeClaimTemplates, func(t *agentsv1beta1.PersistentVolumeClaimTemplate) agentsv1beta1.PersistentVolumeClaimTemplate {
		return *t.DeepCopy()
	})
	putAnnotation(&out.ObjectMeta, V1beta1Annotation, b, !b.empty())
	return out
}

// poolBeta is what a v1beta1 pool says that v1alpha1 cannot: an unset replicas, and our
// extensions (progressDeadlineSeconds, a RollingUpdate's bounds and the rollout status), which a
// v1alpha1 update must not erase.
type poolBeta struct {
	// Replicas unset (v1beta1 defaults it; v1alpha1 requires it), while replicas is With.
	Replicas                *kept[*int32, int32] `json:"replicas,omitempty"`
	ProgressDeadlineSeconds *int32               `json:"progressDeadlineSeconds,omitempty"`
	// RollingUpdate is updateStrategy.rollingUpdate, while updateStrategy.type is With: a
	// strategy changed through v1alpha1 wins, and does not get bounds it may not have.
	RollingUpdate        *kept[*extv1beta1.SandboxWarmPoolRollingUpdate, extv1beta1.SandboxWarmPoolUpdateStrategyType] `json:"rollingUpdate,omitempty"`
	ObservedGeneration   int64                                                                                         `json:"observedGeneration,omitempty"`
	UpdatedReplicas      int32                                                                                         `json:"updatedReplicas,omitempty"`
	UpdatedReadyReplicas int32                                                                                         `json:"updatedReadyReplicas,omitempty"`
	Conditions           []metav1.Condition                                                                            `json:"conditions,omitempty"`
}

func (b *poolBeta) empty() bool {
	return b.Replicas == nil && b.ProgressDeadlineSeconds == nil && b.RollingUpdate == nil && b.ObservedGeneration == 0 &&
		b.UpdatedReplicas == 0 && b.UpdatedReadyReplicas == 0 && len(b.Conditions) == 0
}

// SandboxWarmPoolToHub converts a v1alpha1 pool to v1beta1 for the webhook. v1alpha1 says nothing
// v1beta1 cannot.
func SandboxWarmPoolToHub(in *extv1alpha1.SandboxWarmPool) *extv1beta1.SandboxWarmPool {
	out := SandboxWarmPool(in)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation)
	var b poolBeta
	if takeAnnotation(&out.ObjectMeta, V1beta1Annotation, &b) {
		if k := b.Replicas; k != nil && k.With == in.Spec.Replicas {
			out.Spec.Replicas = clone(k.Value)
		}
		out.Spec.ProgressDeadlineSeconds = b.ProgressDeadlineSeconds
		if k, s := b.RollingUpdate, out.Spec.UpdateStrategy; k != nil && s != nil && k.With == s.Type {
			s.RollingUpdate = k.Value
		}
		out.Status.ObservedGeneration = b.ObservedGeneration
		out.Status.UpdatedReplicas, out.Status.UpdatedReadyReplicas = b.UpdatedReplicas, b.UpdatedReadyReplicas
		out.Status.Conditions = b.Conditions
	}
	return out
}

// SandboxWarmPoolFromHub converts a v1beta1 pool to v1alpha1 for the webhook.
func SandboxWarmPoolFromHub(in *extv1beta1.SandboxWarmPool) *extv1alpha1.SandboxWarmPool {
	out := sandboxWarmPoolV1alpha1(in)
	dropAnnotation(&out.ObjectMeta, V1beta1Annotation)
	dropAnnotation(&out.ObjectMeta, V1alpha1Annotation) // a v1alpha1 pool says nothing v1beta1 cannot
	var b poolBeta
	if in.Spec.Replicas == nil {
		b.Replicas = &kept[*int32, int32]{nil, out.Spec.Replicas}
	}
	b.ProgressDeadlineSeconds = clone(in.Spec.ProgressDeadlineSeconds)
	if s := in.Spec.UpdateStrategy; s != nil && s.RollingUpdate != nil {
		b.RollingUpdate = &kept[*extv1beta1.SandboxWarmPoolRollingUpdate, extv1beta1.SandboxWarmPoolUpdateStrategyType]{s.RollingUpdate.DeepCopy(), s.Type}
	}
	b.ObservedGeneration = in.Status.ObservedGeneration
	b.UpdatedReplicas, b.UpdatedReadyReplicas = in.Status.UpdatedReplicas, in.Status.UpdatedReadyReplicas
	b.Conditions = in.Status.DeepCopy().Conditions
	putAnnotation(&out.ObjectMeta, V1beta1Annotation, b, !b.empty())
	return out
}

// takeAnnotation removes key from m and decodes it into v. It reports false when the annotation
// is absent or is not what a conversion wrote (edited by hand): then nothing is restored.
func takeAnnotation(m *metav1.ObjectMeta, key string, v any) bool {
	s, ok := m.Annotations[key]
	if !ok {
		return false
	}
	dropAnnotation(m, key)
	return json.Unmarshal([]byte(s), v) == nil
}

// putAnnotation writes v as JSON under key when keep says there is something to keep.
func putAnnotation(m *metav1.ObjectMeta, key string, v any, keep bool) {
	if !keep {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings, numbers and Kubernetes API types always marshal
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = string(b)
}

// dropAnnotation removes key, leaving no empty map behind: JSON cannot tell an empty map from
// none, so neither may a round trip.
func dropAnnotation(m *metav1.ObjectMeta, key string) {
	delete(m.Annotations, key)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}
