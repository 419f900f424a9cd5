package convert

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// FuzzKeptAnnotations: the kept-value annotations come from users' objects (a v1alpha1 export
// edited by hand, a copied v1beta1 object), so the conversions read whatever they hold. Whatever
// it is, no conversion panics, and what a conversion writes under the reserved keys is JSON it
// wrote itself (an object of kept values), never the input passed through.
func FuzzKeptAnnotations(f *testing.F) {
	for _, seed := range []string{
		"", "{", "null", "[]", `"x"`, "{}",
		`{"replicas":{"value":null,"with":"Running"}}`,
		`{"replicas":{"value":5,"with":""},"statusReplicas":{"value":-1,"with":"Suspended"}}`,
		`{"operatingMode":{"value":"","with":1},"nodeName":"n"}`,
		`{"operatingMode":{"value":"Bogus","with":null}}`,
		`{"ref":{"value":{"sandboxTemplateRef":"python","warmpool":"none"},"with":"shadow-pool-python"}}`,
		`{"ref":{"value":{"sandboxTemplateRef":"","warmpool":null},"with":""}}`,
		`{"warmPoolRef":{"value":"gpu","with":{"sandboxTemplateRef":"gpu","warmpool":"gpu"}},"volumeClaimTemplates":[{"metadata":{"name":"w"},"spec":{}}]}`,
		`{"volumeClaimTemplates":[null,{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}]}`,
		`{"replicas":{"value":null,"with":1},"observedGeneration":9223372036854775807}`,
		`{"replicas":{"value":1e400}}`,
		`{"progressDeadlineSeconds":120,"updatedReplicas":1,"updatedReadyReplicas":1,"conditions":[{"type":"Available","status":"True","lastTransitionTime":"2026-06-01T12:00:00Z","reason":"MinimumReplicasAvailable","message":"1 of 1 members Ready"}]}`,
		`{"conditions":"Available","progressDeadlineSeconds":-1}`,
		`{"rollingUpdate":{"value":{"maxUnavailable":0,"maxSurge":"50%"},"with":"RollingUpdate"}}`,
		`{"rollingUpdate":{"value":{"maxSurge":{"x":1}},"with":7}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		meta := func() metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: "o", Annotations: map[string]string{V1alpha1Annotation: value, V1beta1Annotation: value}}
		}
		check := func(what string, m metav1.ObjectMeta) {
			for _, k := range []string{V1alpha1Annotation, V1beta1Annotation} {
				v, ok := m.Annotations[k]
				if !ok {
					continue
				}
				var kept map[string]json.RawMessage
				if err := json.Unmarshal([]byte(v), &kept); err != nil || len(kept) == 0 {
					t.Errorf("%s: %s holds %q, not kept values the conversion wrote", what, k, v)
				}
			}
		}
		check("Sandbox to hub", SandboxToHub(&agentsv1alpha1.Sandbox{ObjectMeta: meta()}).ObjectMeta)
		check("Sandbox from hub", SandboxFromHub(&agentsv1beta1.Sandbox{ObjectMeta: meta()}).ObjectMeta)
		check("template to hub", SandboxTemplateToHub(&extv1alpha1.SandboxTemplate{ObjectMeta: meta()}).ObjectMeta)
		check("template from hub", SandboxTemplateFromHub(&extv1beta1.SandboxTemplate{ObjectMeta: meta()}).ObjectMeta)
		check("claim to hub", SandboxClaimToHub(&extv1alpha1.SandboxClaim{ObjectMeta: meta()}).ObjectMeta)
		check("claim from hub", SandboxClaimFromHub(&extv1beta1.SandboxClaim{ObjectMeta: meta()}).ObjectMeta)
		check("pool to hub", SandboxWarmPoolToHub(&extv1alpha1.SandboxWarmPool{ObjectMeta: meta()}).ObjectMeta)
		check("pool from hub", SandboxWarmPoolFromHub(&extv1beta1.SandboxWarmPool{ObjectMeta: meta()}).ObjectMeta)
	})
}
