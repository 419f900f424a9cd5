package convert

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// TestLosslessConversions pins what is kept where, and that an edit of a kept value's
// counterpart, made through the other version, wins over the kept value.
func TestLosslessConversions(t *testing.T) {
	policy := func(p string) *extv1alpha1.WarmPoolPolicy { v := extv1alpha1.WarmPoolPolicy(p); return &v }
	alphaSandbox := func(replicas *int32) *agentsv1alpha1.Sandbox {
		s := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
		s.Spec.Replicas = replicas
		s.Status.Replicas = 1
		s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
		return s
	}
	alphaClaim := func(template string, warmpool *extv1alpha1.WarmPoolPolicy) *extv1alpha1.SandboxClaim {
		c := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Spec.TemplateRef.Name = template
		c.Spec.WarmPool = warmpool
		return c
	}
	betaClaim := func(pool string) *extv1beta1.SandboxClaim {
		c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Spec.WarmPoolRef.Name = pool
		return c
	}
	cases := map[string]struct {
		reason string
		run    func() (want, got any)
	}{
		"sandbox replicas 1": {
			reason: "what v1beta1 can say is not kept: no annotation",
			run: func() (any, any) {
				return map[string]string(nil), SandboxToHub(alphaSandbox(ptr.To[int32](1))).Annotations
			},
		},
		"sandbox created": {
			reason: "a new Sandbox has no status (the API server empties it on create): nothing to keep",
			run: func() (any, any) {
				s := alphaSandbox(ptr.To[int32](1))
				s.Status = agentsv1alpha1.SandboxStatus{}
				hub := SandboxToHub(s)
				return []any{map[string]string(nil), int32(0)}, []any{hub.Annotations, SandboxFromHub(hub).Status.Replicas}
			},
		},
		"sandbox replicas unset": {
			reason: "an unset replicas is kept with the operating mode it became",
			run: func() (any, any) {
				return map[string]string{V1alpha1Annotation: `{"replicas":{"value":null,"with":"Running"}}`},
					SandboxToHub(alphaSandbox(nil)).Annotations
			},
		},
		"sandbox suspended through v1beta1": {
			reason: "suspending through v1beta1 wins over the kept unset replicas",
			run: func() (any, any) {
				hub := SandboxToHub(alphaSandbox(nil))
				hub.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
				got := SandboxFromHub(hub)
				return []any{ptr.To[int32](0), int32(0), map[string]string(nil)}, []any{got.Spec.Replicas, got.Status.Replicas, got.Annotations}
			},
		},
		"sandbox node name": {
			reason: "status.nodeName, which v1alpha1 lacks, survives a v1alpha1 update",
			run: func() (any, any) {
				hub := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
				hub.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
				hub.Status.NodeName = "node-1"
				alpha := SandboxFromHub(hub)
				alpha.Labels = map[string]string{"edited": "true"}
				return "node-1", SandboxToHub(alpha).Status.NodeName
			},
		},
		"sandbox unset mode then replicas 0": {
			reason: "a replicas edit made through v1alpha1 wins over a kept unset operatingMode",
			run: func() (any, any) {
				alpha := SandboxFromHub(&agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
				alpha.Spec.Replicas = ptr.To[int32](0)
				return agentsv1beta1.SandboxOperatingModeSuspended, SandboxToHub(alpha).Spec.OperatingMode
			},
		},
		"claim default policy": {
			reason: "template plus the default policy is the shadow pool and converts back alike: nothing kept",
			run: func() (any, any) {
				hub := SandboxClaimToHub(alphaClaim("python", policy("default")))
				return []any{"shadow-pool-python", map[string]string(nil)}, []any{hub.Spec.WarmPoolRef.Name, hub.Annotations}
			},
		},
		"claim none policy": {
			reason: "v1beta1 cannot say none: the template and policy are kept with the pool they became",
			run: func() (any, any) {
				hub := SandboxClaimToHub(alphaClaim("python", policy("none")))
				return map[string]string{V1alpha1Annotation: `{"ref":{"value":{"sandboxTemplateRef":"python","warmpool":"none"},"with":"shadow-pool-python"}}`}, hub.Annotations
			},
		},
		"claim pool apart from its template": {
			reason: "a named pool with another template keeps the template, as upstream's state annotation does",
			run: func() (any, any) {
				back := SandboxClaimFromHub(SandboxClaimToHub(alphaClaim("python", policy("gpu-pool"))))
				return alphaClaim("python", policy("gpu-pool")).Spec, back.Spec
			},
		},
		"claim pool changed through v1beta1": {
			reason: "a new pool set through v1beta1 wins over the kept template and policy",
			run: func() (any, any) {
				hub := SandboxClaimToHub(alphaClaim("python", policy("none")))
				hub.Spec.WarmPoolRef.Name = "gpu-pool"
				got := SandboxClaimFromHub(hub)
				return []any{"gpu-pool", policy("gpu-pool"), map[string]string(nil)}, []any{got.Spec.TemplateRef.Name, got.Spec.WarmPool, got.Annotations}
			},
		},
		"claim template changed through v1alpha1": {
			reason: "a template changed through v1alpha1 gives its shadow pool",
			run: func() (any, any) {
				alpha := SandboxClaimFromHub(betaClaim("shadow-pool-python"))
				alpha.Spec.TemplateRef.Name = "go"
				return "shadow-pool-go", SandboxClaimToHub(alpha).Spec.WarmPoolRef.Name
			},
		},
		"claim volume claim templates": {
			reason: "a claim's volumeClaimTemplates, which v1alpha1 lacks, survive a v1alpha1 update",
			run: func() (any, any) {
				hub := betaClaim("python-pool")
				hub.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "workspace"}}}
				alpha := SandboxClaimFromHub(hub)
				alpha.Spec.Env = append(alpha.Spec.Env, extv1alpha1.EnvVar{Name: "A", Value: ptr.To("1")})
				return hub.Spec.VolumeClaimTemplates, SandboxClaimToHub(alpha).Spec.VolumeClaimTemplates
			},
		},
		"template policy": {
			reason: "volumeClaimTemplatesPolicy travels in upstream's annotation, and an edit of it through v1alpha1 counts",
			run: func() (any, any) {
				hub := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
				hub.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesPolicyAllowed
				alpha := SandboxTemplateFromHub(hub)
				read := alpha.Annotations[VolumeClaimTemplatesPolicyAnnotation]
				alpha.Annotations[VolumeClaimTemplatesPolicyAnnotation] = "Overrides"
				back := SandboxTemplateToHub(alpha)
				return []any{"Allowed", extv1beta1.VolumeClaimTemplatesPolicyOverrides, map[string]string(nil)},
					[]any{read, back.Spec.VolumeClaimTemplatesPolicy, back.Annotations}
			},
		},
		"pool replicas unset": {
			reason: "an unset v1beta1 replicas reads as 1 and stays unset until a v1alpha1 update changes it",
			run: func() (any, any) {
				hub := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
				hub.Status.ObservedGeneration = 3
				alpha := SandboxWarmPoolFromHub(hub)
				same := SandboxWarmPoolToHub(alpha)
				alpha.Spec.Replicas = 3
				changed := SandboxWarmPoolToHub(alpha)
				return []any{int32(1), (*int32)(nil), int64(3), ptr.To[int32](3)},
					[]any{SandboxWarmPoolFromHub(hub).Spec.Replicas, same.Spec.Replicas, same.Status.ObservedGeneration, changed.Spec.Replicas}
			},
		},
		"pool rollingUpdate": {
			reason: "a RollingUpdate's bounds, which v1alpha1 has no place for, survive a v1alpha1 update while the strategy's type is unchanged; a type changed through v1alpha1 wins and gets no bounds",
			run: func() (any, any) {
				hub := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
				hub.Spec.Replicas = ptr.To[int32](4)
				hub.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType,
					RollingUpdate: &extv1beta1.SandboxWarmPoolRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("50%"))}}
				alpha := SandboxWarmPoolFromHub(hub)
				alpha.Spec.Replicas = 5
				kept := SandboxWarmPoolToHub(alpha)
				want := hub.DeepCopy()
				want.TypeMeta = kept.TypeMeta
				want.Spec.Replicas = ptr.To[int32](5)

				recreate := SandboxWarmPoolFromHub(hub)
				recreate.Spec.UpdateStrategy.Type = extv1alpha1.SandboxWarmPoolUpdateStrategyType(extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType)
				changed := SandboxWarmPoolToHub(recreate)
				return []any{want, &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType}},
					[]any{kept, changed.Spec.UpdateStrategy}
			},
		},
		"pool extensions": {
			reason: "progressDeadlineSeconds and the rollout status, which v1alpha1 has no place for, survive a v1alpha1 update and are kept only when set",
			run: func() (any, any) {
				hub := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
				hub.Spec.Replicas = ptr.To[int32](2)
				hub.Spec.ProgressDeadlineSeconds = ptr.To[int32](120)
				hub.Status = extv1beta1.SandboxWarmPoolStatus{Replicas: 2, ReadyReplicas: 1, UpdatedReplicas: 1, UpdatedReadyReplicas: 1,
					Conditions: []metav1.Condition{{Type: extv1beta1.SandboxWarmPoolProgressing, Status: metav1.ConditionTrue, Reason: extv1beta1.NewMembersCreatedReason,
						Message: "m", ObservedGeneration: 4, LastTransitionTime: metav1.Unix(1_800_000_000, 0)}}}
				alpha := SandboxWarmPoolFromHub(hub)
				alpha.Spec.Replicas = 3
				got := SandboxWarmPoolToHub(alpha)
				want := hub.DeepCopy()
				want.TypeMeta = got.TypeMeta
				want.Spec.Replicas = ptr.To[int32](3)
				bare := SandboxWarmPoolFromHub(&extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1)}})
				return []any{want, map[string]string(nil)}, []any{got, bare.Annotations}
			},
		},
		"annotation edited by hand": {
			reason: "a kept annotation that is not what a conversion wrote restores nothing and is removed",
			run: func() (any, any) {
				alpha := alphaSandbox(ptr.To[int32](1))
				alpha.Annotations = map[string]string{V1beta1Annotation: "{not json", V1alpha1Annotation: `{"replicas":{"value":5,"with":"Running"}}`, "keep": "me"}
				hub := SandboxToHub(alpha)
				return []any{agentsv1beta1.SandboxOperatingModeRunning, map[string]string{"keep": "me"}}, []any{hub.Spec.OperatingMode, hub.Annotations}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, got := tc.run()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
