package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

func TestValidateClaimEnv(t *testing.T) {
	secret := func(name, key string) *extv1beta1.EnvVarSource {
		return &extv1beta1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
	}
	cases := map[string]struct {
		reason string
		env    extv1beta1.EnvVar
		want   []string
	}{
		"literal":       {"a plain value", extv1beta1.EnvVar{Name: "A", Value: ptr.To("x")}, nil},
		"empty literal": {"an explicit empty value is a value", extv1beta1.EnvVar{Name: "A", Value: ptr.To("")}, nil},
		"secret":        {"the guides' reference", extv1beta1.EnvVar{Name: "A", ValueFrom: secret("anthropic", "api-key")}, nil},
		"config map": {"a ConfigMap key", extv1beta1.EnvVar{Name: "A", ValueFrom: &extv1beta1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "model.name"}}}, nil},
		"relaxed name": {"a Pod's env var name may be any printable ASCII but '='", extv1beta1.EnvVar{Name: "1-a.b c", Value: ptr.To("x")}, nil},
		"empty name": {"the claim's schema accepts it, the Pod with the variable is refused", extv1beta1.EnvVar{Name: "", Value: ptr.To("x")},
			[]string{`spec.env[0].name: Invalid value: "": environment variable name must be non-empty`}},
		"name with =": {"the Pod with the variable is refused", extv1beta1.EnvVar{Name: "A=B", Value: ptr.To("x")},
			[]string{`spec.env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"name not ASCII": {"the Pod with the variable is refused", extv1beta1.EnvVar{Name: "é", Value: ptr.To("x")},
			[]string{`spec.env[0].name: Invalid value: "é": a valid environment variable name must consist only of printable ASCII characters other than '='`}},
		"both": {"exactly one of value and valueFrom", extv1beta1.EnvVar{Name: "A", Value: ptr.To("x"), ValueFrom: secret("s", "k")},
			[]string{"spec.env[0].valueFrom: Forbidden: may not be set together with value: exactly one of value and valueFrom must be set"}},
		"neither": {"exactly one of value and valueFrom", extv1beta1.EnvVar{Name: "A"},
			[]string{"spec.env[0].value: Required value: exactly one of value and valueFrom must be set"}},
		"no source": {"a valueFrom needs a source", extv1beta1.EnvVar{Name: "A", ValueFrom: &extv1beta1.EnvVarSource{}},
			[]string{"spec.env[0].valueFrom.secretKeyRef: Required value: exactly one of secretKeyRef and configMapKeyRef must be set"}},
		"missing name and key": {"the Pod would be refused", extv1beta1.EnvVar{Name: "A", ValueFrom: secret("", "")},
			[]string{
				"spec.env[0].valueFrom.secretKeyRef.name: Required value: the Secret in the Pod's namespace to read the variable from",
				"spec.env[0].valueFrom.secretKeyRef.key: Required value: the key of the Secret to read the variable from",
			}},
		"invalid name and key": {"the Pod would be refused", extv1beta1.EnvVar{Name: "A", ValueFrom: secret("Not_A_Name", "a key")},
			[]string{
				`spec.env[0].valueFrom.secretKeyRef.name: Invalid value: "Not_A_Name": Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
				`spec.env[0].valueFrom.secretKeyRef.key: Invalid value: "a key": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &extv1beta1.SandboxClaim{}
			c.Spec.Env = []extv1beta1.EnvVar{tc.env}
			var got []string
			for _, e := range ValidateClaim(c) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestInjectEnvValueFrom: a reference is injected as it is, into a new entry under Allowed and in
// place of a same-named entry under Overrides; a literal replacing a reference drops it.
func TestInjectEnvValueFrom(t *testing.T) {
	ref := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}
	claimEnv := []extv1beta1.EnvVar{
		{Name: "NEW", ValueFrom: &extv1beta1.EnvVarSource{SecretKeyRef: ref.SecretKeyRef.DeepCopy()}},
		{Name: "OLD_REF", Value: ptr.To("literal")},
	}
	cases := map[string]struct {
		policy extv1beta1.EnvVarsInjectionPolicy
		env    []extv1beta1.EnvVar
		want   []corev1.EnvVar
	}{
		"allowed appends the reference": {extv1beta1.EnvVarsInjectionPolicyAllowed, claimEnv[:1],
			[]corev1.EnvVar{{Name: "OLD_REF", ValueFrom: ref}, {Name: "NEW", ValueFrom: ref}}},
		"overrides replaces whole entries": {extv1beta1.EnvVarsInjectionPolicyOverrides, claimEnv,
			[]corev1.EnvVar{{Name: "OLD_REF", Value: "literal"}, {Name: "NEW", ValueFrom: ref}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Env: []corev1.EnvVar{{Name: "OLD_REF", ValueFrom: ref.DeepCopy()}}}}}
			if err := injectEnv(spec, tc.env, tc.policy); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, spec.Containers[0].Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimNeedsColdStart(t *testing.T) {
	cases := map[string]struct {
		spec extv1beta1.SandboxClaimSpec
		want bool
	}{
		"nothing to inject": {extv1beta1.SandboxClaimSpec{}, false},
		"literal env":       {extv1beta1.SandboxClaimSpec{Env: []extv1beta1.EnvVar{{Name: "A", Value: ptr.To("x")}}}, true},
		"env from a Secret": {extv1beta1.SandboxClaimSpec{Env: []extv1beta1.EnvVar{{Name: "A", ValueFrom: &extv1beta1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}, true},
		"volume claim templates": {extv1beta1.SandboxClaimSpec{VolumeClaimTemplates: make([]agentsv1beta1.PersistentVolumeClaimTemplate, 1)}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claimNeedsColdStart(&extv1beta1.SandboxClaim{Spec: tc.spec}); got != tc.want {
				t.Errorf("ClaimNeedsColdStart = %v, want %v", got, tc.want)
			}
		})
	}
}
