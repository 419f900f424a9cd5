package migrate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
)

// TestAgreesWithTypedConversion: the node edits and api/convert (which manifest.Decode applies to
// v1alpha1 objects) are two writings of upstream's rules. For every v1alpha1 object of the golden
// render inputs and of this package's cases, decoding migrate's v1beta1 form must give the same
// defaulted v1beta1 object as decoding the v1alpha1 original, apart from the annotation in which
// the typed conversion keeps what v1beta1 cannot say (a claim's "none" policy, say): migrate
// reports those as findings instead.
func TestAgreesWithTypedConversion(t *testing.T) {
	files, _ := filepath.Glob("../golden/testdata/render/*/input.yaml")
	more, _ := filepath.Glob("testdata/*/input.yaml")
	compared := 0
	for _, f := range append(files, more...) {
		if strings.Contains(f, "/err-") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Parse(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !convert.IsV1alpha1(o.GetAPIVersion()) {
				continue
			}
			n, err := kyaml.FromMap(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			if r := migrate.Object(n, migrate.Options{}); r.Failed() || !r.Changed {
				t.Fatalf("%s %s %s: not converted: %+v", f, o.GetKind(), o.GetName(), r.Findings)
			}
			j, err := n.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			converted := &unstructured.Unstructured{}
			if err := converted.UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
			want, err := manifest.Decode([]*unstructured.Unstructured{o})
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got, err := manifest.Decode([]*unstructured.Unstructured{converted})
			if err != nil {
				t.Fatalf("%s: the converted %s %s does not decode: %v", f, o.GetKind(), o.GetName(), err)
			}
			for _, c := range want.Claims {
				delete(c.Annotations, convert.V1alpha1Annotation)
				if len(c.Annotations) == 0 {
					c.Annotations = nil
				}
			}
			if diff := cmp.Diff(want.Input(), got.Input()); diff != "" {
				t.Errorf("%s %s %s: typed conversion and node edits disagree (-typed +nodes):\n%s", f, o.GetKind(), o.GetName(), diff)
			}
			compared++
		}
	}
	if compared < 15 {
		t.Errorf("compared only %d objects", compared)
	}
}
