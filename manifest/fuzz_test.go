package manifest

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/fuzzseed"
)

func addSeeds(f *testing.F) {
	for _, s := range fuzzseed.Repros {
		f.Add([]byte(s))
	}
	for _, s := range fuzzseed.GoldenInputs() {
		f.Add([]byte(s))
	}
}

// FuzzRead: the reader never panics; what it accepts holds only JSON types, reads the same
// twice, encodes the same through the fast encoder and go-yaml, and survives a round trip through
// Encode unchanged (what the render writes, it reads back as written).
func FuzzRead(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Read("fuzz.yaml", data)
		again, err2 := Read("fuzz.yaml", data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Read is not deterministic: %v vs %v", err, err2)
		}
		if err != nil {
			return
		}
		objs := make([]*unstructured.Unstructured, len(docs))
		for i, d := range docs {
			_ = runtime.DeepCopyJSON(d.Object.Object) // panics on a non-JSON type
			objs[i] = d.Object
			if !cmp.Equal(d.Object.Object, again[i].Object.Object) {
				t.Fatalf("Read is not deterministic on document %d", d.Index)
			}
		}
		for i, o := range objs {
			// The fast encoder writes what go-yaml writes, or leaves the object to it.
			if fast, ok := appendYAML(nil, o.Object); ok {
				if slow, err := encodeGoYAML(o.Object); err != nil || !bytes.Equal(fast, slow) {
					t.Fatalf("object %d: appendYAML and go-yaml differ (-go-yaml +appendYAML):\n%s", i, cmp.Diff(string(slow), string(fast)))
				}
			}
		}
		out, err := Encode(objs)
		if err != nil {
			t.Fatalf("Encode of what Read accepted: %v", err)
		}
		back, err := Parse("encoded.yaml", out)
		if err != nil {
			t.Fatalf("reading back what Encode wrote: %v\n%s", err, out)
		}
		if len(back) != len(objs) {
			t.Fatalf("%d objects written, %d read back", len(objs), len(back))
		}
		for i := range objs {
			if diff := cmp.Diff(objs[i].Object, back[i].Object, sameNumber); diff != "" {
				t.Fatalf("object %d changed in a round trip (-read +read back):\n%s\nencoded:\n%s", i, diff, out)
			}
		}
		if out2, _ := Encode(back); !bytes.Equal(out, out2) {
			t.Fatalf("Encode is not idempotent")
		}
	})
}

// FuzzDecode: admission never panics, and gives the same verdict twice.
func FuzzDecode(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		copies := make([]*unstructured.Unstructured, len(objs))
		for i, o := range objs {
			copies[i] = o.DeepCopy()
		}
		_, err1 := Decode(objs)
		_, err2 := Decode(copies)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Decode is not deterministic:\n%v\n%v", err1, err2)
		}
		for i := range objs {
			if !cmp.Equal(objs[i].Object, copies[i].Object) {
				t.Fatalf("Decode modified its input %d", i)
			}
		}
	})
}

// sameNumber compares numbers as JSON does, by value: 8.0 is written as 8 and read back as an
// integer, which is the same JSON number.
var sameNumber = cmp.FilterValues(func(x, y any) bool {
	_, xn := number(x)
	_, yn := number(y)
	return xn && yn
}, cmp.Comparer(func(x, y any) bool {
	a, _ := number(x)
	b, _ := number(y)
	return a == b
}))

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
