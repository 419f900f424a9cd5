package krm

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// TestWriteResultsMatchesMarshal checks that the results list writeResults writes is the one
// sigs.k8s.io/yaml.Marshal wrote for the whole list, byte for byte, whether resultValue encodes
// a result directly or declines it.
func TestWriteResultsMatchesMarshal(t *testing.T) {
	ref := &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		NameMeta: kyaml.NameMeta{Name: "Bad_Name", Namespace: "default"}}
	long := `Sandbox default/Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	var many framework.Results
	for i := range 2*writeBatch + 5 {
		many = append(many, &framework.Result{Message: long, Severity: framework.Error, ResourceRef: ref,
			Field: &framework.Field{Path: "metadata.name", CurrentValue: "Bad_Name"}, Tags: FileTags(i+1, 0)})
	}
	cases := map[string]struct {
		reason  string
		results framework.Results
		direct  bool // resultValue encodes every result itself
		written bool // appendResult writes every one (not checked when false)
	}{
		"Finding": {
			reason: "A finding with every field set, a message longer than the line go-yaml v2 folds at, and tags.",
			results: framework.Results{{Message: long, Severity: framework.Error, ResourceRef: ref,
				Field: &framework.Field{Path: "metadata.name", CurrentValue: "Bad_Name"},
				File:  &framework.File{Path: "sandboxes/a.yaml", Index: 3}, Tags: FileTags(4, 17)}},
			direct:  true,
			written: true,
		},
		"Omitted": {
			reason: "Empty strings, a zero index and empty tags are left out; pointers that are set stay, as {} when empty; an empty current value stays.",
			results: framework.Results{
				{Message: "plain", Severity: framework.Warning, File: &framework.File{Path: "a.yaml"}, Tags: map[string]string{}},
				{Message: "x", ResourceRef: &kyaml.ResourceIdentifier{}, Field: &framework.Field{CurrentValue: ""}, File: &framework.File{}},
				{},
			},
			direct: true,
		},
		"Quoting": {
			reason: "Strings go-yaml quotes: numbers, booleans, leading spaces, indicators, a newline, a tab, non-ASCII text.",
			results: framework.Results{
				{Message: "123", Severity: framework.Info, Field: &framework.Field{Path: "yes", CurrentValue: "0o17", ProposedValue: "~"}},
				{Message: " leading: colon # hash", Tags: map[string]string{"a": "true", "b": "null", "sandbox-gitops.dev/line": "7"}},
				{Message: "two\nlines\n", Severity: framework.Error, ResourceRef: &kyaml.ResourceIdentifier{NameMeta: kyaml.NameMeta{Name: "tab\there"}}},
				{Message: "naïve – ünïcode " + strings.Repeat("wörd ", 30), Field: &framework.Field{Path: "spec.x", CurrentValue: "'quoted'"}},
				{Message: "- dash", Field: &framework.Field{Path: "[0]", CurrentValue: "{a: b}"}},
			},
			direct: true,
		},
		"Batches": {
			reason:  "More results than one batch encodes: the batches are written in order.",
			results: many,
			direct:  true,
			written: true,
		},
		"Declined": {
			reason: "Values other than strings, and strings that are not UTF-8, take sigs.k8s.io/yaml's own path.",
			results: framework.Results{
				{Message: "number", Field: &framework.Field{Path: "spec.replicas", CurrentValue: int64(-1)}},
				{Message: "float", Field: &framework.Field{Path: "spec.x", ProposedValue: 1.5}},
				{Message: "list", Field: &framework.Field{Path: "spec.x", CurrentValue: []any{"a", 1, map[string]any{"b": true}}}},
				{Message: "bytes \xff", Severity: framework.Error},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := yaml.Marshal(tc.results)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			w := bufio.NewWriter(&got)
			if err := writeResults(w, tc.results); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("%s\nwriteResults: -want +got:\n%s", tc.reason, diff)
			}
			for i, r := range tc.results {
				if _, direct := resultValue(r); direct != tc.direct {
					t.Errorf("%s\nresultValue of result %d: direct %v, want %v", tc.reason, i, direct, tc.direct)
				}
				if _, written := appendResult(nil, r); tc.written && !written {
					t.Errorf("%s\nappendResult left result %d to go-yaml", tc.reason, i)
				}
			}
		})
	}
}

// TestWriteResultsMatchesMarshalOnRandomResults compares writeResults with sigs.k8s.io/yaml.Marshal
// on results made of random strings, drawn mostly from the characters go-yaml v2 quotes, escapes
// or folds at (spaces, quotes, indicators, digits, words it reads as booleans), at lengths around
// its 80 columns, so that appendResult's choices are checked where they are hardest.
func TestWriteResultsMatchesMarshalOnRandomResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	pieces := []string{"a", "b", "Z", "x-1", " ", " ", " ", "  ", "'", `"`, `\`, ":", ": ", "#", " #", "-", "- ", "?", ",", "[", "]",
		"{", "}", "&", "*", "!", "|", ">", "%", "@", "`", ".", "...", "---", "~", "<<", "+", "0", "7", "12", "_",
		"yes", "no", "on", "off", "true", "Null", "y", "n", "ü", "\t", "\n", "2006-01-02", "1.5", "0x1F", "e3"}
	// hostile words may hold what appendResult leaves to go-yaml (a tab, a line break, non-ASCII,
	// a leading sign, digit or dot); the others mostly start with a letter.
	hostile := false
	word := func() string {
		if rng.IntN(8) == 0 {
			return ""
		}
		var b strings.Builder
		if !hostile && rng.IntN(4) > 0 {
			b.WriteString("s")
		}
		n := rng.IntN(40)
		if rng.IntN(3) == 0 {
			n += 20 + rng.IntN(40) // past the fold
		}
		for range n {
			p := pieces[rng.IntN(len(pieces))]
			for !hostile && (p == "ü" || p == "\t" || p == "\n") {
				p = pieces[rng.IntN(len(pieces))]
			}
			b.WriteString(p)
		}
		return b.String()
	}
	var results framework.Results
	for range 5000 {
		hostile = rng.IntN(5) == 0
		r := &framework.Result{Message: word(), Severity: framework.Severity(word())}
		if rng.IntN(2) == 0 {
			r.ResourceRef = &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: word(), Kind: word()}, NameMeta: kyaml.NameMeta{Name: word(), Namespace: word()}}
		}
		if rng.IntN(2) == 0 {
			r.Field = &framework.Field{Path: word()}
			if rng.IntN(2) == 0 {
				r.Field.CurrentValue = word()
			}
			if rng.IntN(4) == 0 {
				r.Field.ProposedValue = word()
			}
		}
		if rng.IntN(2) == 0 {
			r.File = &framework.File{Path: word(), Index: rng.IntN(5) - 1}
		}
		switch rng.IntN(4) {
		case 0:
			r.Tags = FileTags(1+rng.IntN(100), rng.IntN(3000))
		case 1:
			r.Tags = map[string]string{TagDocument: word()}
		case 2:
			if rng.IntN(4) == 0 {
				r.Tags = map[string]string{"other": word()}
			}
		}
		results = append(results, r)
	}
	// A few longer messages of plain words, as findings are.
	for i := range 200 {
		results = append(results, &framework.Result{Message: strings.Repeat("word ", i%60) + "end", Severity: framework.Error})
	}
	want, err := yaml.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	w := bufio.NewWriter(&got)
	if err := writeResults(w, results); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("writeResults on random results: -want +got:\n%s", diff)
	}
	direct := 0
	for _, r := range results {
		if _, ok := appendResult(nil, r); ok {
			direct++
		}
	}
	if direct < len(results)/10 {
		t.Errorf("appendResult wrote %d of %d results; the test checks it on too few", direct, len(results))
	}
	t.Logf("appendResult wrote %d of %d results", direct, len(results))
}
