package krm

import (
	"strings"
	"testing"
)

const alphaSandbox = `
apiVersion: agents.x-k8s.io/v1alpha1
kind: Sandbox
metadata:
  name: paused
  namespace: default
  annotations:
    config.kubernetes.io/path: sandboxes/paused.yaml
spec:
  replicas: 0
  podTemplate:
    spec:
      containers:
      - name: c
        image: busybox
`

// TestExpandConvertsV1alpha1Sources: in expand mode a v1alpha1 source comes out as v1beta1 (its
// path annotation kept), unless keepSourceVersions asks for it as written; validate mode changes
// nothing either way.
func TestExpandConvertsV1alpha1Sources(t *testing.T) {
	cases := map[string]struct {
		config    string
		want      []string
		wantNever []string
	}{
		"default converts": {"",
			[]string{"apiVersion: agents.x-k8s.io/v1beta1\n  kind: Sandbox", "operatingMode: Suspended", "config.kubernetes.io/path: sandboxes/paused.yaml"},
			[]string{"v1alpha1", "replicas:"}},
		"keepSourceVersions": {"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  keepSourceVersions: true",
			[]string{"apiVersion: agents.x-k8s.io/v1alpha1", "replicas: 0"},
			[]string{"operatingMode: Suspended"}},
		"validate": {"apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nspec:\n  mode: validate",
			[]string{"apiVersion: agents.x-k8s.io/v1alpha1", "replicas: 0"},
			[]string{"operatingMode"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.config, alphaSandbox, configMap)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNever {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			if !strings.Contains(out, "name: untouched # a comment that must survive") {
				t.Errorf("the ConfigMap was not passed through as it was:\n%s", out)
			}
		})
	}
}

// TestExpandRefusesLossyConversion: a v1alpha1 claim whose template differs from its pool's is
// an error result naming the field and the file; the items come out unchanged.
func TestExpandRefusesLossyConversion(t *testing.T) {
	items := []string{`
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: gpu, namespace: default}
spec:
  podTemplate:
    spec:
      containers: [{name: a, image: a}]
`, `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: gpu-pool, namespace: default}
spec: {sandboxTemplateRef: {name: gpu}, replicas: 0}
`, `
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxClaim
metadata:
  name: c
  namespace: default
  annotations: {config.kubernetes.io/path: claims/c.yaml}
spec: {sandboxTemplateRef: {name: python}, warmpool: gpu-pool}
`}
	out, err := run(t, "", items...)
	if err == nil {
		t.Fatalf("no error:\n%s", out)
	}
	for _, w := range []string{"path: spec.sandboxTemplateRef.name", "converting to v1beta1 would lose it", "path: claims/c.yaml", "apiVersion: extensions.agents.x-k8s.io/v1alpha1"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "kind: Pod") {
		t.Errorf("rendered children despite the error:\n%s", out)
	}
}
