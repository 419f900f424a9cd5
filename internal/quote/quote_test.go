package quote

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQuote(t *testing.T) {
	long := strings.Repeat("a", 10485760)
	cases := map[string]struct {
		reason    string
		in        string
		wantName  string
		wantValue string
	}{
		"Plain":   {reason: "a plain name is written as it is", in: "alice", wantName: "alice", wantValue: `"alice"`},
		"Unicode": {reason: "printable characters need no quotes", in: "café", wantName: "café", wantValue: `"café"`},
		"Newline": {reason: "a newline in a name split a finding line", in: "a\nb: evil", wantName: `"a\nb: evil"`, wantValue: `"a\nb: evil"`},
		"BOM":     {reason: "an invisible U+FEFF is shown", in: "\ufeffSandbox", wantName: `"\ufeffSandbox"`, wantValue: `"\ufeffSandbox"`},
		"Long": {reason: "a 10 MB name gave 20 MB of standard error", in: long,
			wantName: `"` + long[:200] + `…" (10485760 characters)`, wantValue: `"` + long[:200] + `…" (10485760 characters)`},
		"Empty": {reason: "no name stays no name", in: "", wantName: "", wantValue: `""`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantName, Name(tc.in)); diff != "" {
				t.Errorf("%s\nName (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantValue, Value(tc.in)); diff != "" {
				t.Errorf("%s\nValue (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
