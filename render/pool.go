package render

import (
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// replicas is a pool's desired size: spec.replicas, 1 when unset (upstream's default).
func replicas(pool *extv1beta1.SandboxWarmPool) int32 {
	if pool.Spec.Replicas == nil {
		return 1
	}
	return *pool.Spec.Replicas
}

// memberNameAlphabet is the alphabet of the API server's generateName suffixes (no vowels, so no
// words), so our names look like the ones upstream's pools get.
const memberNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// maxGeneratedNameBase is how much of the prefix generateName keeps (63 - 5 random characters).
const maxGeneratedNameBase = 58

// PoolMemberName is the deterministic name of a pool's ordinal-th member: "<pool>-" (cut to 58
// characters, as generateName cuts it) and 5 characters derived from the pool's namespace, name,
// ordinal and an attempt number. Upstream uses generateName, whose random suffix server-side
// apply cannot produce; this is our deliberate deviation. Callers that need unused names use
// PoolMemberNames.
func PoolMemberName(namespace, pool string, ordinal, attempt int) string {
	base := pool + "-"
	if len(base) > maxGeneratedNameBase {
		base = base[:maxGeneratedNameBase]
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace + "/" + pool + "/" + strconv.Itoa(ordinal) + "/" + strconv.Itoa(attempt)))
	v := h.Sum64()
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = memberNameAlphabet[v%uint64(len(memberNameAlphabet))]
		v /= uint64(len(memberNameAlphabet))
	}
	return base + string(suffix)
}

// PoolMemberNames returns n member names for a pool, none of them in taken: the names a render
// or a replenishing controller gives new members. The same inputs always give the same names.
func PoolMemberNames(namespace, pool string, n int, taken map[string]bool) []string {
	out := make([]string, 0, n)
	used := map[string]bool{}
	for ordinal := 0; len(out) < n; ordinal++ {
		for attempt := 0; ; attempt++ {
			name := PoolMemberName(namespace, pool, ordinal, attempt)
			if !taken[name] && !used[name] {
				used[name] = true
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// PoolHashes are the two hashes upstream stamps on pool members, computed from the template as
// stored (defaulted), before secure defaults and before the pool adds labels.
type PoolHashes struct {
	// PodTemplate is the deprecated sandbox-pod-template-hash.
	PodTemplate string
	// Blueprint is sandbox-template-hash, which decides staleness.
	Blueprint string
}

// TemplateHashes computes PoolHashes for a template.
func TemplateHashes(t *extv1beta1.SandboxTemplate) (PoolHashes, error) {
	pt, err := PodTemplateHash(&t.Spec.PodTemplate)
	if err != nil {
		return PoolHashes{}, err
	}
	bp, err := BlueprintHash(&t.Spec.SandboxBlueprint)
	if err != nil {
		return PoolHashes{}, err
	}
	return PoolHashes{PodTemplate: pt, Blueprint: bp}, nil
}

// PoolSandbox is the Sandbox upstream's pool creates for a member: the template's blueprint with
// the pool's identity and both hashes as labels (on the Sandbox and its pod template), the
// template-ref annotation, created-by controller, the autoscaler's safe-to-evict unless disabled
// or set by the template, and the secure pod defaults.
func PoolSandbox(pool *extv1beta1.SandboxWarmPool, t *extv1beta1.SandboxTemplate, name string, hashes PoolHashes, opts Options) *agentsv1beta1.Sandbox {
	poolHash := NameHash(pool.Name)
	refHash := NameHash(pool.Spec.TemplateRef.Name)
	sb := &agentsv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: pool.Namespace,
			Labels: map[string]string{
				agentsv1beta1.SandboxWarmPoolLabel:                  poolHash,
				agentsv1beta1.SandboxTemplateRefHashLabel:           refHash,
				agentsv1beta1.SandboxLaunchTypeLabel:                agentsv1beta1.SandboxLaunchTypeWarm,
				agentsv1beta1.DeprecatedSandboxPodTemplateHashLabel: hashes.PodTemplate,
				agentsv1beta1.SandboxTemplateHashLabel:              hashes.Blueprint,
				agentsv1beta1.CreatedByLabel:                        "controller",
			},
			Annotations:     map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: pool.Spec.TemplateRef.Name},
			OwnerReferences: controllerRef(extv1beta1.GroupVersion, extv1beta1.SandboxWarmPoolKind, pool),
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: *t.Spec.SandboxBlueprint.DeepCopy()},
	}
	md := &sb.Spec.PodTemplate.ObjectMeta
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[agentsv1beta1.SandboxWarmPoolLabel] = poolHash
	md.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = refHash
	md.Labels[agentsv1beta1.DeprecatedSandboxPodTemplateHashLabel] = hashes.PodTemplate
	md.Labels[agentsv1beta1.SandboxTemplateHashLabel] = hashes.Blueprint
	if _, set := md.Annotations[autoscalerSafeEvict]; !set && !opts.DisableWarmPoolEviction {
		if md.Annotations == nil {
			md.Annotations = map[string]string{}
		}
		md.Annotations[autoscalerSafeEvict] = "true"
	}
	expectedPodSpec(t, &sb.Spec.PodTemplate.Spec, opts)
	return sb
}

// expectedPodSpec turns a template's pod spec into what its Sandboxes carry: secure defaults,
// then the policy packs (violations were reported on the template).
func expectedPodSpec(t *extv1beta1.SandboxTemplate, spec *corev1.PodSpec, opts Options) {
	opts.Policies.NetworkPolicy.SecurePodDefaults(spec, usesSecureDefaultPolicy(t))
	_ = opts.Policies.Packs.ApplyPod(spec, field.NewPath("spec"))
}

// poolStatus is the status upstream's pool writes: replicas counts the active members (not being
// deleted), readyReplicas those whose Ready condition is True, selector the warm-pool label, and
// observedGeneration the pool's generation. Members must be the pool's own (see poolMember).
func poolStatus(pool *extv1beta1.SandboxWarmPool, members []*agentsv1beta1.Sandbox) extv1beta1.SandboxWarmPoolStatus {
	st := extv1beta1.SandboxWarmPoolStatus{
		Selector:           agentsv1beta1.SandboxWarmPoolLabel + "=" + NameHash(pool.Name),
		ObservedGeneration: pool.Generation,
	}
	for _, m := range members {
		if m.DeletionTimestamp != nil {
			continue
		}
		st.Replicas++
		if meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady) {
			st.ReadyReplicas++
		}
	}
	return st
}

// poolMember reports whether sb belongs to pool: it carries the pool's warm-pool label and is
// controlled by the pool (or by nothing: an orphan the pool adopts). Members another object
// controls are ignored, as upstream ignores them.
func poolMember(pool *extv1beta1.SandboxWarmPool, sb *agentsv1beta1.Sandbox) bool {
	return poolMemberOf(pool, NameHash(pool.Name))(sb)
}

// poolMemberOf is poolMember for one pool, with its name's hash computed once rather than for
// each Sandbox asked about: a pool's pass asks it of every member.
func poolMemberOf(pool *extv1beta1.SandboxWarmPool, hash string) func(*agentsv1beta1.Sandbox) bool {
	return func(sb *agentsv1beta1.Sandbox) bool {
		if sb.Namespace != pool.Namespace || sb.Labels[agentsv1beta1.SandboxWarmPoolLabel] != hash {
			return false
		}
		ref := metav1.GetControllerOfNoCopy(sb)
		if ref == nil {
			return true
		}
		group, kind := groupKindOf(ref)
		return group == extv1beta1.GroupVersion.Group && kind == extv1beta1.SandboxWarmPoolKind && ref.Name == pool.Name &&
			(pool.UID == "" || ref.UID == pool.UID)
	}
}

// updateStrategy is a pool's effective strategy: OnReplenish unless Recreate or RollingUpdate is
// set.
func updateStrategy(pool *extv1beta1.SandboxWarmPool) extv1beta1.SandboxWarmPoolUpdateStrategyType {
	if s := pool.Spec.UpdateStrategy; s != nil && (s.Type == extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType || s.Type == extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType) {
		return s.Type
	}
	return extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType
}

// isStale reports whether a pool member no longer matches the pool's template, as upstream's
// isSandboxStale decides: a member made from another template is stale; an orphan is compared in
// full; an owned member with the current blueprint hash is fresh; otherwise the blueprint is
// compared: pod spec against the template's after secure defaults (and our policy packs), volume
// claim templates by name and spec in order, and service. Template labels, annotations,
// networkPolicy and injection policies never make a member stale.
func isStale(sb *agentsv1beta1.Sandbox, t *extv1beta1.SandboxTemplate, current PoolHashes, opts Options) bool {
	if sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] != NameHash(t.Name) {
		return true
	}
	orphan := metav1.GetControllerOfNoCopy(sb) == nil
	if !orphan {
		h := sb.Labels[agentsv1beta1.SandboxTemplateHashLabel]
		if h != "" && h == current.Blueprint {
			return false
		}
	}
	return !sameBlueprint(t, &sb.Spec.SandboxBlueprint, opts)
}

func sameBlueprint(t *extv1beta1.SandboxTemplate, got *agentsv1beta1.SandboxBlueprint, opts Options) bool {
	want := t.Spec.PodTemplate.Spec.DeepCopy()
	expectedPodSpec(t, want, opts)
	if !equality.Semantic.DeepEqual(want, &got.PodTemplate.Spec) {
		return false
	}
	tv := t.Spec.VolumeClaimTemplates
	if len(tv) != len(got.VolumeClaimTemplates) {
		return false
	}
	for i := range tv {
		if tv[i].Name != got.VolumeClaimTemplates[i].Name || !equality.Semantic.DeepEqual(tv[i].Spec, got.VolumeClaimTemplates[i].Spec) {
			return false
		}
	}
	return equality.Semantic.DeepEqual(t.Spec.Service, got.Service)
}
