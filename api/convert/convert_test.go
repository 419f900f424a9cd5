package convert

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

func TestSandboxReplicas(t *testing.T) {
	cases := map[string]struct {
		replicas *int32
		want     agentsv1beta1.SandboxOperatingMode
	}{
		"unset runs":    {nil, agentsv1beta1.SandboxOperatingModeRunning},
		"one runs":      {ptr.To[int32](1), agentsv1beta1.SandboxOperatingModeRunning},
		"zero suspends": {ptr.To[int32](0), agentsv1beta1.SandboxOperatingModeSuspended},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
			in.Spec.Replicas = tc.replicas
			if diff := cmp.Diff(tc.want, Sandbox(in).Spec.OperatingMode); diff != "" {
				t.Errorf("operatingMode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimPool(t *testing.T) {
	policy := func(p string) *extv1alpha1.WarmPoolPolicy { v := extv1alpha1.WarmPoolPolicy(p); return &v }
	cases := map[string]struct {
		reason  string
		policy  *extv1alpha1.WarmPoolPolicy
		sandbox string
		want    string
	}{
		"named pool":     {"a specific pool is kept", policy("gpu-pool"), "", "gpu-pool"},
		"default policy": {"the migration guide's shadow pool", policy("default"), "", "shadow-pool-python"},
		"none policy":    {"the v1beta1 API cannot say none", policy("none"), "", "shadow-pool-python"},
		"unset policy":   {"defaulting gives default", nil, "", "shadow-pool-python"},
		"warm adopted":   {"the adopted Sandbox's pool is its name minus the suffix", policy("default"), "python-pool-x7k2p", "python-pool"},
		"cold sandbox":   {"a Sandbox named after the claim was cold-started", policy("default"), "my-claim", "shadow-pool-python"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "my-claim"}}
			in.Spec.TemplateRef.Name = "python"
			in.Spec.WarmPool = tc.policy
			in.Status.SandboxStatus.Name = tc.sandbox
			if diff := cmp.Diff(tc.want, SandboxClaim(in).Spec.WarmPoolRef.Name); diff != "" {
				t.Errorf("%s: warmPoolRef.name (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTemplateVolumeClaimTemplatesPolicyAnnotation(t *testing.T) {
	in := &extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Annotations: map[string]string{
		VolumeClaimTemplatesPolicyAnnotation: "Overrides",
	}}}
	out := SandboxTemplate(in)
	if diff := cmp.Diff(extv1beta1.VolumeClaimTemplatesPolicyOverrides, out.Spec.VolumeClaimTemplatesPolicy); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if out.Annotations != nil {
		t.Errorf("the round-trip annotation was kept: %v", out.Annotations)
	}
}

func TestPoolReplicas(t *testing.T) {
	in := &extv1alpha1.SandboxWarmPool{}
	in.Spec.Replicas = 0
	if got := SandboxWarmPool(in).Spec.Replicas; got == nil || *got != 0 {
		t.Errorf("replicas = %v, want an explicit 0 (v1beta1 would default nil to 1)", got)
	}
}

// TestClaimEnv: literal values (an explicit empty one included) and Secret/ConfigMap references
// survive the conversion as they are.
func TestClaimEnv(t *testing.T) {
	in := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	in.Spec.TemplateRef.Name = "python"
	in.Spec.Env = []extv1alpha1.EnvVar{
		{Name: "EMPTY", Value: ptr.To("")},
		{Name: "KEY", ValueFrom: &extv1alpha1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "anthropic"}, Key: "api-key"}}, ContainerName: "agent"},
		{Name: "MODEL", ValueFrom: &extv1alpha1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "model", Optional: ptr.To(true)}}},
	}
	want := []extv1beta1.EnvVar{
		{Name: "EMPTY", Value: ptr.To("")},
		{Name: "KEY", ValueFrom: &extv1beta1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "anthropic"}, Key: "api-key"}}, ContainerName: "agent"},
		{Name: "MODEL", ValueFrom: &extv1beta1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "model", Optional: ptr.To(true)}}},
	}
	got := SandboxClaim(in).Spec.Env
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	in.Spec.Env[1].ValueFrom.SecretKeyRef.Name = "changed"
	if got[1].ValueFrom.SecretKeyRef.Name != "anthropic" {
		t.Error("the converted claim shares the reference with its source")
	}
}
