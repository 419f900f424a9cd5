package manifest

import (
	"strings"
	"testing"
)

// TestLargeAnnotationsRefused: a 1 MB annotation rendered with exit 0; the API server refuses
// annotations above 256 KiB in total.
func TestLargeAnnotationsRefused(t *testing.T) {
	in := "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: big\n  annotations:\n    big: " +
		strings.Repeat("x", 1<<20) + "\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - {name: a, image: busybox}\n"
	objs, err := Parse("big.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(objs)
	if err == nil || !strings.Contains(err.Error(), "metadata.annotations: Too long: may not be more than 262144 bytes") {
		t.Errorf("Decode error = %.300v\nwant the annotations' size refused", err)
	}
}
