package bundle

import (
	"bytes"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/fuzzseed"
)

// FuzzExpand renders a bundle: never a panic; the same bytes again and in reverse order; on
// success a render of the output changes nothing; on error nothing is returned (the CLI then
// writes nothing).
func FuzzExpand(f *testing.F) {
	for _, s := range fuzzseed.Repros {
		f.Add([]byte(s))
	}
	for _, s := range fuzzseed.GoldenInputs() {
		f.Add([]byte(s))
	}
	// Small pools keep each run fast; the limit itself is tested elsewhere.
	opts := render.Options{MaxPoolReplicas: 50}
	expand := func(objs []*unstructured.Unstructured) ([]byte, error) {
		out, err := Expand(objs, opts)
		if err != nil {
			if out != nil {
				return nil, errHalfWritten
			}
			return nil, err
		}
		return manifest.Encode(out)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifest.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		first, err := expand(copyAll(objs))
		if err == errHalfWritten {
			t.Fatal("Expand returned objects with an error")
		}
		rev := copyAll(objs)
		slices.Reverse(rev)
		second, err2 := expand(rev)
		if errText(err) != errText(err2) || !bytes.Equal(first, second) {
			t.Fatalf("not deterministic across input order:\n%v\n%v", err, err2)
		}
		if err != nil {
			return
		}
		again, err := manifest.Parse("output.yaml", first)
		if err != nil {
			t.Fatalf("the output does not read back: %v", err)
		}
		third, err := expand(again)
		if err != nil {
			t.Fatalf("rendering the output failed: %v", err)
		}
		if !bytes.Equal(first, third) {
			t.Fatalf("rendering the output changed it:\n%s\n---- became\n%s", first, third)
		}
	})
}

type halfWritten struct{}

func (halfWritten) Error() string { return "half written" }

var errHalfWritten error = halfWritten{}

func copyAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
