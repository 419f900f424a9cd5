package krm

import (
	"bufio"
	"bytes"
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
	}{
		"Finding": {
			reason: "A finding with every field set, a message longer than the line go-yaml v2 folds at, and tags.",
			results: framework.Results{{Message: long, Severity: framework.Error, ResourceRef: ref,
				Field: &framework.Field{Path: "metadata.name", CurrentValue: "Bad_Name"},
				File:  &framework.File{Path: "sandboxes/a.yaml", Index: 3}, Tags: FileTags(4, 17)}},
			direct: true,
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
			}
		})
	}
}
