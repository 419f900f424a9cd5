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
// ResourceList the function cannot process comes back unchanged (only results added), its items
// with it, as the KRM functions specification asks. Only an input holding no ResourceList that
// can be read (not YAML, not a mapping, another kind) is answered with a ResourceList of the
// result alone.
func TestMalformedResourceList(t *testing.T) {
	const item = "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n"
	const badConfig = "functionConfig:\n  apiVersion: render.sandbox-gitops.dev/v1alpha1\n  kind: SandboxRender\n  spec: {mode: preview}\n"
	cases := map[string]struct {
		reason string
		in     string
		want   string // in the message of the one error result
		// back is the ResourceList the answer gives back, without its results (as YAML); "" when
		// the answer is a ResourceList of the result alone, with no items.
		back string
	}{
		"TopLevelList": {
			reason: "echo '[1]' | sandbox-render fn panicked in krm.fileOf",
			in:     "[1]\n",
			want:   "the input must be a ResourceList object, not a list",
		},
		"ItemIsAList": {
			reason: "an item - [1] panicked in krm.fileOf",
			in:     rlHead + "items:\n- [1]\n",
			want:   "items[0] must be an object (a mapping with apiVersion and kind), not a list",
			back:   rlHead + "items:\n- [1]\n",
		},
		"SecondDocumentIsAList": {
			reason: "a second document that is a list panicked; the first, a ResourceList, comes back",
			in:     rlHead + "items:\n" + item + "---\n- [1]\n",
			want:   "the input has 2 YAML documents",
			back:   rlHead + "items:\n" + item,
		},
		"TwoResourceLists": {
			reason: "two ResourceList documents were nested as items; the items of the first were then dropped",
			in:     rlHead + "items:\n" + item + "---\n" + rlHead + "items: []\n",
			want:   "the input has 2 YAML documents",
			back:   rlHead + "items:\n" + item,
		},
		"ItemsIsANumber": {
			reason: "items: 5 exited 0 and dropped the items",
			in:     rlHead + "items: 5\n",
			want:   "items must be a list of objects, not the value \"5\"",
			back:   rlHead + "items: 5\n",
		},
		"ItemsIsAMapping": {
			reason: "an items mapping was exploded into a list of its keys and values",
			in:     rlHead + "items:\n  a: b\n  c: d\n",
			want:   "items must be a list of objects, not a mapping",
			back:   rlHead + "items:\n  a: b\n  c: d\n",
		},
		"FunctionConfigIsAString": {
			reason: "a functionConfig must be an object",
			in:     rlHead + "items:\n" + item + "functionConfig: nope\n",
			want:   "functionConfig must be an object",
			back:   rlHead + "items:\n" + item + "functionConfig: nope\n",
		},
		"FunctionConfigInvalid": {
			reason: "well-formed items and an invalid functionConfig: the items come back",
			in:     rlHead + "items:\n" + item + badConfig,
			want:   `spec.mode: Unsupported value: "preview"`,
			back:   rlHead + "items:\n" + item + badConfig,
		},
		"FunctionConfigInvalidNoItems": {
			reason: "items: [] came back as items: (null)",
			in:     rlHead + "items: []\n" + badConfig,
			want:   `spec.mode: Unsupported value: "preview"`,
			back:   rlHead + "items: []\n" + badConfig,
		},
		"NotAResourceList": {
			reason: "a plain object is not a ResourceList: it has no items to give back",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			want:   "kind must be ResourceList",
		},
		"UnknownAPIVersion": {
			reason: "a ResourceList of another apiVersion was answered with items: []",
			in:     "apiVersion: config.kubernetes.io/v2\nkind: ResourceList\nitems:\n" + item,
			want:   "apiVersion must be one of config.kubernetes.io/v1, config.kubernetes.io/v1beta1",
			back:   "apiVersion: config.kubernetes.io/v2\nkind: ResourceList\nitems:\n" + item,
		},
		"DuplicateTopLevelKey": {
			reason: "two items keys: which one is meant? Both come back, as they came",
			in:     rlHead + "items:\n" + item + "items: []\n",
			want:   `key "items" already defined at line 3`,
			back:   rlHead + "items:\n" + item + "items: []\n",
		},
		"DuplicateKeyInMetadata": {
			reason: "render refused a duplicate key outside the items, and the function took the same bytes",
			in:     rlHead + "metadata:\n  name: a\n  name: b\nitems:\n" + item,
			want:   `metadata: line 5: mapping key "name" already defined at line 4`,
			back:   rlHead + "metadata:\n  name: a\n  name: b\nitems:\n" + item,
		},
		"DuplicateKeyInResults": {
			reason: "the input's results are replaced, but a duplicate key there is still not YAML",
			in:     rlHead + "items:\n" + item + "results:\n- {message: a, message: b}\n",
			want:   `results: line 8: mapping key "message" already defined at line 8`,
			back:   rlHead + "items:\n" + item,
		},
		"ResultsIsAString": {
			reason: "results: a passed without a word",
			in:     rlHead + "items:\n" + item + "results: a\n",
			want:   `line 7: results must be a list of results (mappings with message and severity), not the value "a"`,
			back:   rlHead + "items:\n" + item,
		},
		"ResultIsAList": {
			reason: "each result is a mapping",
			in:     rlHead + "items:\n" + item + "results:\n- [a]\n",
			want:   "line 8: results[0] must be a result (a mapping with message and severity), not a list",
			back:   rlHead + "items:\n" + item,
		},
		"SyntaxError": {
			reason: "a syntax error is a result with the line; not YAML, there is nothing to give back",
			in:     rlHead + "items:\n- a: [\n",
			want:   "line 4",
		},
		"SyntaxErrorInASecondDocument": {
			reason: "the first document, a ResourceList go-yaml reads, comes back",
			in:     rlHead + "items:\n" + item + "---\na: [\n",
			want:   "document 2, line 8: YAML syntax",
			back:   rlHead + "items:\n" + item,
		},
		"DocumentAfterDots": {
			reason: "kyaml's reader drops a document after ... with no ---; the ResourceList comes back",
			in:     rlHead + "items:\n" + item + "...\napiVersion: v1\nkind: ConfigMap\n",
			want:   "document 2, line 8: a document after a ... line (the end of the one before) must start with a --- line",
			back:   rlHead + "items:\n" + item,
		},
		"UTF16": {
			reason: "a UTF-16 ResourceList was read, its items written back as UTF-16 bytes in a UTF-8 list",
			in:     utf16LE(rlHead + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n"),
			want:   "document 1, line 1: the input is UTF-16 (little-endian)",
		},
		"UTF16SecondDocument": {
			reason: "go-yaml read a UTF-16 document after ---; the ResourceList before it comes back",
			in:     rlHead + "items:\n" + item + "---\n" + utf16LE("kind: X\n"),
			want:   "document 2, line 8: a UTF-16 (little-endian) byte-order mark",
			back:   rlHead + "items:\n" + item,
		},
		"NULInAnItem": {
			reason: "YAML allows no NUL byte: not YAML, nothing to give back",
			in:     rlHead + "items:\n" + item + "  data: {k: \"a\x00b\"}\n",
			want:   "document 1, line 7: a NUL byte, which YAML does not allow",
		},
		"BOMInAnItem": {
			reason: "a byte-order mark inside the list passed through into the output; refused, the list comes back as it came",
			in:     rlHead + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: \"a\xef\xbb\xbf\"}\n",
			want:   "document 1, line 6: a byte-order mark (U+FEFF) inside the stream",
			back:   rlHead + "items:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: \"a\xef\xbb\xbf\"}\n",
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
			if err := got.PipeE(kyaml.Clear("results")); err != nil {
				t.Fatal(err)
			}
			back := tc.back
			if back == "" {
				back = rlHead + "items: []\n"
			}
			want, err := kyaml.Parse(back)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.MustString(), got.MustString()); diff != "" {
				t.Errorf("%s\nthe answer, without its results (-want +got):\n%s", tc.reason, diff)
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
