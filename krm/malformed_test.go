package krm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

const rlHead = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"

// TestMalformedResourceList: every input shape is an error result, never a panic, and a
// ResourceList the function cannot process comes back unchanged (only results added).
func TestMalformedResourceList(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string // in the message of the one error result
		// unchanged: the output without its results is the input (as YAML).
		unchanged bool
	}{
		"TopLevelList": {
			reason:    "echo '[1]' | sandbox-render fn panicked in krm.fileOf",
			in:        "[1]\n",
			want:      "the input must be a ResourceList object, not a list",
			unchanged: false,
		},
		"ItemIsAList": {
			reason:    "an item - [1] panicked in krm.fileOf",
			in:        rlHead + "items:\n- [1]\n",
			want:      "items[0] must be an object (a mapping with apiVersion and kind), not a list",
			unchanged: true,
		},
		"SecondDocumentIsAList": {
			reason: "a second document that is a list panicked",
			in:     rlHead + "items: []\n---\n- [1]\n",
			want:   "the input has 2 YAML documents",
		},
		"TwoResourceLists": {
			reason: "two ResourceList documents were nested as items",
			in:     rlHead + "items: []\n---\n" + rlHead + "items: []\n",
			want:   "the input has 2 YAML documents",
		},
		"ItemsIsANumber": {
			reason:    "items: 5 exited 0 and dropped the items",
			in:        rlHead + "items: 5\n",
			want:      "items must be a list of objects, not the value \"5\"",
			unchanged: true,
		},
		"ItemsIsAMapping": {
			reason:    "an items mapping was exploded into a list of its keys and values",
			in:        rlHead + "items:\n  a: b\n  c: d\n",
			want:      "items must be a list of objects, not a mapping",
			unchanged: true,
		},
		"FunctionConfigIsAString": {
			reason:    "a functionConfig must be an object",
			in:        rlHead + "items: []\nfunctionConfig: nope\n",
			want:      "functionConfig must be an object",
			unchanged: true,
		},
		"NotAResourceList": {
			reason:    "a plain object is not a ResourceList",
			in:        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			want:      "kind must be ResourceList",
			unchanged: false,
		},
		"DuplicateTopLevelKey": {
			reason:    "two items keys: which one is meant?",
			in:        rlHead + "items: []\nitems: []\n",
			want:      `key "items" already defined at line 3`,
			unchanged: false,
		},
		"SyntaxError": {
			reason: "a syntax error is a result with the line",
			in:     rlHead + "items:\n- a: [\n",
			want:   "line 4",
		},
		"UTF16": {
			reason: "a UTF-16 ResourceList was read, its items written back as UTF-16 bytes in a UTF-8 list",
			in:     utf16LE(rlHead + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n"),
			want:   "document 1, line 1: the input is UTF-16 (little-endian)",
		},
		"BOMInAnItem": {
			reason: "a byte-order mark inside the list passed through into the output",
			in:     rlHead + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: \"a\xef\xbb\xbf\"}\n",
			want:   "document 1, line 6: a byte-order mark (U+FEFF) inside the stream",
		},
		"Empty": {
			reason: "nothing on stdin",
			in:     "",
			want:   "the input is empty",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(strings.NewReader(tc.in), &out)
			var results framework.Results
			if !errors.As(err, &results) || len(results) != 1 {
				t.Fatalf("%s\nRun error = %v, want one error result", tc.reason, err)
			}
			if !strings.Contains(results[0].Message, tc.want) || results[0].Severity != framework.Error {
				t.Errorf("%s\nresult = %s %q, want an error containing %q", tc.reason, results[0].Severity, results[0].Message, tc.want)
			}
			got, perr := kyaml.Parse(out.String())
			if perr != nil {
				t.Fatalf("%s\noutput is not YAML: %v\n%s", tc.reason, perr, out.String())
			}
			if got.Field("results") == nil {
				t.Errorf("%s\noutput has no results:\n%s", tc.reason, out.String())
			}
			if !tc.unchanged {
				return
			}
			if err := got.PipeE(kyaml.Clear("results")); err != nil {
				t.Fatal(err)
			}
			want, err := kyaml.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.MustString(), got.MustString()); diff != "" {
				t.Errorf("%s\nthe input was changed (-in +out):\n%s", tc.reason, diff)
			}
		})
	}
}

// utf16LE is s, ASCII, in UTF-16 little-endian with its byte-order mark.
func utf16LE(s string) string {
	b := []byte{0xff, 0xfe}
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return string(b)
}

// TestBadItems: items that are objects but not well formed are error results naming the item,
// with the input unchanged; metadata: [a] panicked in kyaml's annotation accessors.
func TestBadItems(t *testing.T) {
	cases := map[string]struct {
		reason string
		items  []string
		want   string
	}{
		"MetadataIsAList": {
			reason: "metadata: [a] panicked in krm.fileOf",
			items:  []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: [a]"},
			want:   "items[0]",
		},
		"DuplicateKey": {
			reason: "a duplicate key is an error naming the key and line",
			items:  []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, name: b}"},
			want:   `items[0]: line 6: mapping key "name" already defined at line 6`,
		},
		"NoKind": {
			reason: "every item needs apiVersion and kind",
			items:  []string{sandbox, "apiVersion: v1\nmetadata: {name: a}"},
			want:   "items[1]: line",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, "", tc.items...)
			var results framework.Results
			if !errors.As(err, &results) || len(results) == 0 {
				t.Fatalf("%s\nRun error = %v, want error results", tc.reason, err)
			}
			if !strings.Contains(results[0].Message, tc.want) {
				t.Errorf("%s\nresult %q, want it to contain %q", tc.reason, results[0].Message, tc.want)
			}
			if got := len(items(t, out)); got != len(tc.items) {
				t.Errorf("%s\n%d items out, want the %d given back unchanged", tc.reason, got, len(tc.items))
			}
		})
	}
}

// TestPassThroughWithHeadComment: an item whose comment starts on its "- " line was re-encoded
// (comment spacing changed); it passes through byte for byte.
func TestPassThroughWithHeadComment(t *testing.T) {
	item := "- # a comment above\n  # and another\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n  data:\n    flag: yes   # spaced\n"
	var out bytes.Buffer
	if err := Run(strings.NewReader(rlHead+"items:\n"+item), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), item) {
		t.Errorf("the item did not pass through byte for byte:\n%s", out.String())
	}
}
