package migrate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

func parseObjects(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestObjects: v1alpha1 objects are replaced by their v1beta1 form, changed only where the
// versions differ; every other object is the same pointer, in the same place.
func TestObjects(t *testing.T) {
	in := parseObjects(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
---
apiVersion: agents.x-k8s.io/v1alpha1
kind: Sandbox
metadata: {name: s, namespace: default, labels: {a: b}}
spec:
  replicas: 0
  podTemplate: {spec: {containers: [{name: c, image: busybox}]}}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: p, namespace: default}
spec: {sandboxTemplateRef: {name: t}}
`)
	out, err := Objects(in)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != in[0] || out[2] != in[2] {
		t.Error("objects that are not v1alpha1 were replaced")
	}
	want := map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1",
		"kind":       "Sandbox",
		"metadata":   map[string]any{"name": "s", "namespace": "default", "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"operatingMode": "Suspended",
			"podTemplate":   map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}},
		},
	}
	if diff := cmp.Diff(want, out[1].Object); diff != "" {
		t.Errorf("converted Sandbox (-want +got):\n%s", diff)
	}
	if in[1].GetAPIVersion() != "agents.x-k8s.io/v1alpha1" {
		t.Error("the input object was modified")
	}
}

// TestObjectsRefusesLoss: a claim whose template differs from its pool's is an error on
// the claim's field, and nothing is returned.
func TestObjectsRefusesLoss(t *testing.T) {
	in := parseObjects(t, `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: gpu-pool, namespace: default}
spec: {sandboxTemplateRef: {name: gpu}}
---
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxClaim
metadata: {name: c, namespace: default}
spec: {sandboxTemplateRef: {name: python}, warmpool: gpu-pool}
`)
	out, err := Objects(in)
	var ie *render.InvalidError
	if out != nil || !errors.As(err, &ie) {
		t.Fatalf("out %v, err %v; want no output and an InvalidError", out, err)
	}
	if ie.Kind != "SandboxClaim" || ie.Name != "c" || len(ie.Errs) != 1 || ie.Errs[0].Field != "spec.sandboxTemplateRef.name" {
		t.Errorf("error %v does not name the claim's spec.sandboxTemplateRef.name", err)
	}
}
