package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeRefusesWhatTheAPIServerRefuses: objects the schema admits but whose rendered children
// the API server refuses (issue 21's differential run) are refused at decode, each error naming
// the object and the field.
func TestDecodeRefusesWhatTheAPIServerRefuses(t *testing.T) {
	const pod = "  podTemplate:\n    spec:\n      containers: [{name: c, image: i}]\n"
	const badVCT = "  volumeClaimTemplates:\n  - metadata: {name: data, annotations: {'bad key': x}}\n    spec: {accessModes: [ReadWriteSometimes], resources: {requests: {storage: 1Gi}}}\n"
	vctErrs := func(object string) []string {
		return []string{
			object + `: spec.volumeClaimTemplates[0].metadata.annotations: Invalid value: "bad key"`,
			object + `: spec.volumeClaimTemplates[0].spec.accessModes: Unsupported value: "ReadWriteSometimes"`,
		}
	}
	cases := map[string]struct {
		reason string
		in     string
		want   []string
	}{
		"SandboxVCT": {
			reason: "a Sandbox's volume claim template with an invalid access mode and annotation key rendered a PVC the API server refuses",
			in:     "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: s, namespace: d}\nspec:\n" + pod + badVCT,
			want:   vctErrs("Sandbox d/s"),
		},
		"V1alpha1SandboxVCT": {
			reason: "the same, written as v1alpha1",
			in:     "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: s, namespace: d}\nspec:\n" + pod + badVCT,
			want:   vctErrs("Sandbox d/s"),
		},
		"TemplateVCT": {
			reason: "a template's volume claim templates become every claimed Sandbox's PVCs",
			in:     "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t, namespace: d}\nspec:\n" + pod + badVCT,
			want:   vctErrs("SandboxTemplate d/t"),
		},
		"ClaimVCT": {
			reason: "a claim's volume claim templates become its Sandbox's PVCs",
			in:     "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c, namespace: d}\nspec:\n  warmPoolRef: {name: p}\n" + badVCT,
			want:   vctErrs("SandboxClaim d/c"),
		},
		"ClaimEnvName": {
			reason: "an env name that is empty or holds '=' rendered a Pod the API server refuses",
			in:     "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c, namespace: d}\nspec:\n  warmPoolRef: {name: p}\n  env: [{name: '', value: x}, {name: 'A=B', value: y}]\n",
			want: []string{
				`SandboxClaim d/c: spec.env[0].name: Invalid value: "": environment variable name must be non-empty`,
				`SandboxClaim d/c: spec.env[1].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`,
			},
		},
		"OwnerReferenceUnknownKey": {
			reason: "an unknown key in an owner reference was dropped by the typed decoding, and the API server refused the Sandbox",
			in:     "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: s\n  namespace: d\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: c, uid: u, owner: me}]\nspec:\n" + pod,
			want:   []string{"Sandbox d/s: metadata.ownerReferences[0].owner: Forbidden: unknown field: it is not in an owner reference"},
		},
		"OwnerReferenceMissingFields": {
			reason: "every owner reference needs apiVersion, kind, name and uid; an unknown key does not hide them",
			in:     "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: s\n  namespace: d\n  ownerReferences: [{kind: ConfigMap, Name: c}]\nspec:\n" + pod,
			want: []string{
				"Sandbox d/s: metadata.ownerReferences[0].Name: Forbidden: unknown field",
				"Sandbox d/s: metadata.ownerReferences[0].apiVersion: Required value",
				"Sandbox d/s: metadata.ownerReferences[0].name: Required value",
				"Sandbox d/s: metadata.ownerReferences[0].uid: Required value",
			},
		},
		"PassedThroughMetadataTypes": {
			reason: "a ConfigMap with annotations: [x], labels: 3, a name that is a list or an annotation k: [v] passed through render, and kustomize built k: [v] as k: \"\"",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {annotations: [x]}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, labels: 3}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [a]}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: n, annotations: {k: [v], ok: x, gone: null}}\n",
			want: []string{
				`ConfigMap : metadata.annotations: Invalid value: "a list": must be a mapping of strings to strings`,
				`ConfigMap : metadata.name: Invalid value: "a list": must be a string`,
				"ConfigMap b: metadata.labels: Invalid value: 3: must be a mapping of strings to strings",
				`ConfigMap n/d: metadata.annotations[k]: Invalid value: "a list": must be a string`,
			},
		},
		"OwnerReferenceTypes": {
			reason: "a wrong type in an owner reference said only that the metadata cannot be read",
			in:     "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: s\n  namespace: d\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: 5, uid: u, controller: 'yes'}]\nspec:\n" + pod,
			want: []string{
				`Sandbox d/s: metadata.ownerReferences[0].controller: Invalid value: "yes": must be a boolean (true or false)`,
				"Sandbox d/s: metadata.ownerReferences[0].name: Invalid value: 5: must be a string",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse("in.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(objs)
			var got []string
			if bad, ok := err.(Errors); ok {
				for _, ie := range bad {
					for _, fe := range ie.Errs {
						got = append(got, ie.Object()+": "+fe.Error())
					}
				}
			}
			// Each want is the start of one error: the rest is apimachinery's wording.
			for i := range got {
				if i < len(tc.want) && strings.HasPrefix(got[i], tc.want[i]) {
					got[i] = tc.want[i]
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}
