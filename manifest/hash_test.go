package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestUpstreamHashVectors reproduces the blueprint and pod template hashes of the upstream spec
// (§5.2, §10.9) from YAML, through the same decoding a render uses. The YAML omits the port
// protocol: the CRD default (TCP) must be applied before hashing, as the API server applies it
// before upstream's controller hashes, or the hash is 9f43e93d instead of e6830f96.
func TestUpstreamHashVectors(t *testing.T) {
	const python = `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python-template
  namespace: default
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        ports:
        - containerPort: 8888
`
	const withVCT = python + `
  volumeClaimTemplates:
  - metadata:
      name: workspace
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1024Mi
`
	cases := map[string]struct {
		reason        string
		yaml          string
		wantBlueprint string
		wantPod       string
	}{
		"no protocol written": {
			reason:        "the CRD defaults protocol: TCP before hashing",
			yaml:          python,
			wantBlueprint: "e6830f96",
			wantPod:       "a76fdb4b",
		},
		"volume claim template": {
			reason:        "1024Mi is canonicalised to 1Gi in the hashed JSON",
			yaml:          withVCT,
			wantBlueprint: "fba8fd40",
			wantPod:       "a76fdb4b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse("template.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Decode(objs)
			if err != nil {
				t.Fatal(err)
			}
			bp := &b.Templates[0].Spec.SandboxBlueprint
			got, err := render.BlueprintHash(bp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantBlueprint, got); diff != "" {
				t.Errorf("%s: BlueprintHash (-want +got):\n%s", tc.reason, diff)
			}
			got, err = render.PodTemplateHash(&bp.PodTemplate)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPod, got); diff != "" {
				t.Errorf("%s: PodTemplateHash (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHashWithoutDefaulting pins the spec's third vector: the same blueprint hashed as written,
// without the CRD default, gives 9f43e93d. It is the hash a render that skipped defaulting would
// compute, and one that can never occur in a cluster (§10.9).
func TestHashWithoutDefaulting(t *testing.T) {
	objs, err := Parse("template.yaml", []byte(`
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: raw
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        ports:
        - containerPort: 8888
`))
	if err != nil {
		t.Fatal(err)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := fromUnstructuredForTest(objs[0], sb); err != nil {
		t.Fatal(err)
	}
	got, err := render.BlueprintHash(&sb.Spec.SandboxBlueprint)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("9f43e93d", got); diff != "" {
		t.Errorf("BlueprintHash without defaults (-want +got):\n%s", diff)
	}
}

func fromUnstructuredForTest(u *unstructured.Unstructured, into *agentsv1beta1.Sandbox) error {
	if err := fromUnstructured(u.Object, into); err != nil {
		return err
	}
	return nil
}
