package manifest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestEncodeQuotesNumberLikeStrings guards upstream's §10 pitfall: a hash label such as 58130e46
// written unquoted is read back as the float 5.813e+50 and the API server rejects the label.
func TestEncodeQuotesNumberLikeStrings(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetName("p")
	u.SetLabels(map[string]string{"a": "58130e46", "b": "12345678", "c": "0x1f2e3d4c"})
	b, err := Encode([]*unstructured.Unstructured{u})
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("encoded", b)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range u.GetLabels() {
		if got := back[0].GetLabels()[k]; got != want {
			t.Errorf("label %s read back as %q, want %q; YAML was:\n%s", k, got, want, b)
		}
	}
	if !strings.Contains(string(b), `"58130e46"`) {
		t.Errorf("58130e46 not quoted:\n%s", b)
	}
}

func TestParseRejectsObjectsWithoutKind(t *testing.T) {
	_, err := Parse("bad.yaml", []byte("metadata:\n  name: x\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 1") {
		t.Fatalf("err = %v, want one naming the file and document", err)
	}
}
