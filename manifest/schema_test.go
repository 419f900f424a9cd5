package manifest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidationMemoIsByContent: objects that differ only in metadata share one validation, and
// the memo never hands one object's verdict to an object with other content.
func TestValidationMemoIsByContent(t *testing.T) {
	doc := func(name, mode string) string {
		return "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: " + name +
			"\nspec:\n  operatingMode: " + mode + "\n  podTemplate:\n    spec:\n      containers:\n      - name: a\n        image: a\n"
	}
	in := strings.Join([]string{doc("a", "Paused"), doc("b", "Paused"), doc("c", "Running"), doc("d", "Sleeping")}, "---\n")
	objs, err := Parse("memo.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(objs)
	var got []string
	for _, ie := range err.(Errors) {
		for _, fe := range ie.Errs {
			got = append(got, ie.Object()+" "+fe.Field+" "+fe.BadValue.(string))
		}
	}
	want := []string{
		"Sandbox a spec.operatingMode Paused",
		"Sandbox b spec.operatingMode Paused",
		"Sandbox d spec.operatingMode Sleeping",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestDecodeInParallelKeepsInputOrder decodes enough objects to fan out over every core and
// requires the bundle and the errors in input order, the same on every run.
func TestDecodeInParallelKeepsInputOrder(t *testing.T) {
	var b strings.Builder
	for i := range 600 {
		mode := "Running"
		if i%7 == 0 {
			mode = "Bogus"
		}
		b.WriteString("---\napiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: s" + strings.Repeat("x", i%5) + strconv.Itoa(i) +
			"\nspec:\n  operatingMode: " + mode + "\n  podTemplate:\n    spec:\n      containers:\n      - name: a\n        image: a\n")
	}
	objs, err := Parse("many.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for range 3 {
		_, err := Decode(objs)
		if err == nil {
			t.Fatal("no errors")
		}
		if first == "" {
			first = err.Error()
		} else if diff := cmp.Diff(first, err.Error()); diff != "" {
			t.Fatalf("errors changed between runs:\n%s", diff)
		}
	}
	if n := len(strings.Split(first, "\n")); n != 86 {
		t.Errorf("%d errors, want 86 (every seventh of 600)", n)
	}
	objs = objs[1:7]
	bundle, err := Decode(objs)
	if err != nil {
		t.Fatal(err)
	}
	for i, sb := range bundle.Sandboxes {
		if sb.Name != objs[i].GetName() {
			t.Errorf("Sandbox %d is %s, want %s (input order)", i, sb.Name, objs[i].GetName())
		}
	}
}
