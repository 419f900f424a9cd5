package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNameHash checks the FNV-1a vectors of the upstream spec (§2.1).
func TestNameHash(t *testing.T) {
	cases := map[string]string{
		"":                "811c9dc5",
		"a":               "e40c292c",
		"my-sandbox":      "374de8f5",
		"sandbox-name":    "ab179450",
		"test-template":   "69155462",
		"pool":            "91dd7983",
		"python-template": "cede6d20",
		"my-pool":         "244dc158",
	}
	for in, want := range cases {
		if diff := cmp.Diff(want, NameHash(in)); diff != "" {
			t.Errorf("NameHash(%q) (-want +got):\n%s", in, diff)
		}
	}
}
