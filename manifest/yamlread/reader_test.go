package yamlread

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestReadYAML12 pins the reading kustomize uses (kyaml, YAML 1.2), which the CLI did not share
// before: each of these read differently in render and in the function.
func TestReadYAML12(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		path   []string
		want   any
	}{
		"YesIsAString": {
			reason: "render rewrote a pass-through ConfigMap's flag: yes to true (YAML 1.1)",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {flag: yes, other: on}\n",
			path:   []string{"data", "flag"},
			want:   "yes",
		},
		"YIsAString": {
			reason: "metadata: {name: y} was the boolean true in render and the string y in the function",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n",
			path:   []string{"metadata", "name"},
			want:   "y",
		},
		"IntegersAreInt64": {
			reason: "unstructured objects hold JSON types",
			in:     "apiVersion: v1\nkind: X\nspec: {a: 12, b: 0o17, c: 18446744073709551615}\n",
			path:   []string{"spec"},
			want:   map[string]any{"a": int64(12), "b": int64(15), "c": float64(18446744073709551615)},
		},
		"TimestampsStayStrings": {
			reason: "kyaml reads an unquoted date as the string written",
			in:     "apiVersion: v1\nkind: X\nspec: {at: 2026-01-02}\n",
			path:   []string{"spec", "at"},
			want:   "2026-01-02",
		},
		"MergeKeys": {
			reason: "kyaml applies merge keys; explicit keys win",
			in:     "apiVersion: v1\nkind: X\nbase: &b {a: 1, b: 2}\nspec:\n  <<: *b\n  b: 3\n",
			path:   []string{"spec"},
			want:   map[string]any{"a": int64(1), "b": int64(3)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Parse("in.yaml", []byte(tc.in))
			if err != nil {
				t.Fatalf("%s\nParse: %v", tc.reason, err)
			}
			var got any = objs[0].Object
			for _, p := range tc.path {
				got = got.(map[string]any)[p]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReadErrors checks that malformed input is an error naming the file, the 1-based document
// and the line, never a panic.
func TestReadErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"DuplicateKey": {
			reason: "render kept the last of {image: busybox, image: alpine}; the function refused it",
			in:     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n  - {name: a, image: busybox, image: alpine}\n",
			want:   `in.yaml: document 2, line 10: mapping key "image" already defined at line 10`,
		},
		"SyntaxErrorLine": {
			reason: "build and validate placed a syntax error on different lines, neither the right one",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n  labels:\n    a: b\n   c: d\n",
			want:   "in.yaml: document 2, line 10: YAML syntax:",
		},
		"List": {
			reason: "a document that is a list is not an object",
			in:     "- [1]\n",
			want:   "in.yaml: document 1, line 1: an object must be a mapping with apiVersion and kind, not a list",
		},
		"SecondDocumentScalar": {
			reason: "every document must be an object",
			in:     "apiVersion: v1\nkind: A\n---\n5\n",
			want:   `in.yaml: document 2, line 4: an object must be a mapping with apiVersion and kind, not the value "5"`,
		},
		"NoKind": {
			reason: "objects need apiVersion and kind",
			in:     "metadata:\n  name: x\n",
			want:   "in.yaml: document 1, line 1: every object needs apiVersion and kind (strings); apiVersion is missing",
		},
		"KindNotString": {
			reason: "a kind that is a list is not a kind; the line is the field's",
			in:     "apiVersion: v1\nkind: [a]\n",
			want:   "in.yaml: document 1, line 2: every object needs apiVersion and kind (strings); kind is a list",
		},
		"MetadataList": {
			reason: "metadata: [a] crashed sandbox-render build in kyaml's accessors (issue 37); the line is metadata's",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: [a]\n",
			want:   "in.yaml: document 1, line 3: metadata must be a mapping (name, namespace, labels, ...), not a list",
		},
		"MetadataString": {
			reason: "metadata: a was said to be \"empty\"",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: a\n",
			want:   `in.yaml: document 1, line 3: metadata must be a mapping (name, namespace, labels, ...), not the string "a"`,
		},
		"MetadataNull": {
			reason: "metadata: null passed through, and kustomize (missing metadata.name) and the API server refuse it",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata: null\n",
			want:   "in.yaml: document 1, line 3: metadata must be a mapping (name, namespace, labels, ...), not empty (null)",
		},
		"MetadataWithNothingAfterIt": {
			reason: "metadata: and nothing after it is null too",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\ndata: {a: b}\n",
			want:   "in.yaml: document 1, line 3: metadata must be a mapping (name, namespace, labels, ...), not empty (null)",
		},
		"ListItemMetadataNull": {
			reason: "the items of a List are objects as any other",
			in:     "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: null}\n",
			want:   "in.yaml: document 1 (line 1): items[0] of the List: metadata must be a mapping (name, namespace, labels, ...), not empty (null)",
		},
		"APIVersionThreeParts": {
			reason: "apiVersion a/b/c passed through, and the API server answered \"Object 'Kind' is missing\"",
			in:     "apiVersion: a/b/c\nkind: A\n",
			want:   `in.yaml: document 1, line 1: apiVersion "a/b/c" must be a version (v1) or a group and a version (apps/v1)`,
		},
		"APIVersionNoVersion": {
			reason: "apiVersion example.com/ passed through, and the API server answered \"Object 'apiVersion' is missing\"",
			in:     "apiVersion: example.com/\nkind: A\n",
			want:   `in.yaml: document 1, line 1: apiVersion "example.com/" must be a version (v1) or a group and a version (apps/v1)`,
		},
		"Infinity": {
			reason: "JSON cannot hold .inf; encoding it later failed with a Go error",
			in:     "apiVersion: v1\nkind: A\nspec: {x: .inf}\n",
			want:   "in.yaml: document 1, line 3: .inf is not a number an API server accepts",
		},
		"AliasBomb": {
			reason: "a billion-laughs document must be refused, not expanded",
			in: "apiVersion: v1\nkind: A\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
				"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
				"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			want: "aliases expand to too many values",
		},
		"UTF16LE": {
			reason: "UTF-16 was read, and its text written back as UTF-16 bytes inside a UTF-8 stream",
			in:     "\xff\xfea\x00p\x00i\x00\n\x00",
			want:   "in.yaml: document 1, line 1: the input is UTF-16 (little-endian) (it starts with that byte-order mark); YAML input must be UTF-8",
		},
		"UTF16BE": {
			reason: "UTF-16 in either byte order",
			in:     "\xfe\xff\x00a\x00p\x00i\x00\n",
			want:   "in.yaml: document 1, line 1: the input is UTF-16 (big-endian)",
		},
		"UTF32LE": {
			reason: "UTF-32 was refused as \"control characters are not allowed\", which says nothing of the encoding",
			in:     "\xff\xfe\x00\x00a\x00\x00\x00",
			want:   "in.yaml: document 1, line 1: the input is UTF-32 (little-endian)",
		},
		"UTF32BE": {
			reason: "UTF-32 in either byte order",
			in:     "\x00\x00\xfe\xff\x00\x00\x00a",
			want:   "in.yaml: document 1, line 1: the input is UTF-32 (big-endian)",
		},
		"BOMStartingASecondDocument": {
			reason: "a byte-order mark after a --- (files concatenated) passed through into the output",
			in:     "apiVersion: v1\nkind: A\n---\n\xef\xbb\xbfapiVersion: v1\nkind: B\n",
			want:   "in.yaml: document 2, line 4: a byte-order mark (U+FEFF) inside the stream",
		},
		"BOMInAValue": {
			reason: "a U+FEFF inside a value is a byte-order mark in the middle of the stream, invisible in review",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: \"b\xef\xbb\xbf\"\n",
			want:   "in.yaml: document 2, line 7: a byte-order mark (U+FEFF) inside the stream",
		},
		"UTF16AfterASeparator": {
			reason: "go-yaml read a UTF-16 document after --- (a UTF-16 Sandbox rendered a Pod), and render wrote its bytes, NULs included",
			in:     "apiVersion: v1\nkind: A\n---\n" + wide("\xff\xfe", "kind: X\n", 2, false),
			want:   "in.yaml: document 2, line 4: a UTF-16 (little-endian) byte-order mark: the text after it is UTF-16, and YAML input must be UTF-8",
		},
		"UTF16BEAfterASeparator": {
			reason: "in either byte order",
			in:     "apiVersion: v1\nkind: A\n---\n" + wide("\xfe\xff", "kind: X\n", 2, true),
			want:   "in.yaml: document 2, line 4: a UTF-16 (big-endian) byte-order mark",
		},
		"UTF32AfterASeparator": {
			reason: "UTF-32's mark starts with UTF-16's: it is named as UTF-32",
			in:     "apiVersion: v1\nkind: A\n---\n" + wide("\xff\xfe\x00\x00", "kind: X\n", 4, false),
			want:   "in.yaml: document 2, line 4: a UTF-32 (little-endian) byte-order mark",
		},
		"UTF16MarkInAValue": {
			reason: "a UTF-16 mark is never part of UTF-8 text",
			in:     "apiVersion: v1\nkind: A\nmetadata:\n  name: \"a\xff\xfeb\"\n",
			want:   "in.yaml: document 1, line 4: a UTF-16 (little-endian) byte-order mark",
		},
		"UTF16WithoutAMark": {
			reason: "UTF-16 without a mark was refused as \"control characters are not allowed\", naming no line or encoding",
			in:     wide("", "apiVersion: v1\n", 2, false),
			want:   "in.yaml: document 1, line 1: a NUL byte: the text looks like UTF-16 (little-endian) without a byte-order mark, and YAML input must be UTF-8: convert it, say with iconv -f UTF-16LE -t UTF-8",
		},
		"UTF16BEWithoutAMarkAfterASeparator": {
			reason: "the encoding is guessed from the document's first bytes, as YAML 1.2 guesses a stream's",
			in:     "apiVersion: v1\nkind: A\n---\n" + wide("", "kind: X\n", 2, true),
			want:   "in.yaml: document 2, line 4: a NUL byte: the text looks like UTF-16 (big-endian) without a byte-order mark",
		},
		"UTF32WithoutAMark": {
			reason: "UTF-32 without a mark",
			in:     wide("", "apiVersion: v1\n", 4, false),
			want:   "in.yaml: document 1, line 1: a NUL byte: the text looks like UTF-32 (little-endian) without a byte-order mark",
		},
		"NULInAValue": {
			reason: "YAML allows no NUL byte anywhere; the line is the NUL's",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\ndata:\n  k: \"a\x00b\"\n",
			want:   "in.yaml: document 2, line 7: a NUL byte, which YAML does not allow: remove it",
		},
		"DocumentAfterDots": {
			reason: "after ... a document with no --- was kept by render and dropped by kustomize (build) and kubectl",
			in:     "apiVersion: v1\nkind: A\n...\n# the next one\n\napiVersion: v1\nkind: B\n",
			want:   "in.yaml: document 2, line 6: a document after a ... line (the end of the one before) must start with a --- line",
		},
		"ListItemsNotAList": {
			reason: "kind: List with items: 5 passed through as an object the API server refuses",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: List\nitems: 5\n",
			want:   `in.yaml: document 2 (line 4): items of the List: must be a list of objects, not 5`,
		},
		"ItemsOfAnotherListKind": {
			reason: "every kind ending in List is flattened, so every one must hold a list",
			in:     "apiVersion: v1\nkind: ConfigMapList\nitems: {a: b}\n",
			want:   "in.yaml: document 1 (line 1): items of the ConfigMapList: must be a list of objects, not a mapping",
		},
		"ObjectOverTheAPIServersLimit": {
			reason: "a 10 MB command list took 29 s and 1.5 GB to validate, and no API server takes it",
			in:     "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: ConfigMap\ndata:\n  k: " + strings.Repeat("x", MaxObjectBytes) + "\n",
			want:   "in.yaml: document 2 (line 4) is 3145771 bytes: no API server takes an object over 3145728 bytes (3 MiB, its request limit), so it could never be applied; split it",
		},
		"ListItemNotObject": {
			reason: "the items of a List must be objects",
			in:     "apiVersion: v1\nkind: List\nitems: [5]\n",
			want:   "in.yaml: document 1 (line 1): items[0] of the List: every item must be an object with apiVersion and kind",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Read("in.yaml", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nRead error = %v\nwant one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// wide is ASCII text s in UTF-16 or UTF-32 (size 2 or 4 bytes a character), big- or
// little-endian, after mark.
func wide(mark, s string, size int, bigEndian bool) string {
	b := []byte(mark)
	for i := 0; i < len(s); i++ {
		c := make([]byte, size)
		if bigEndian {
			c[size-1] = s[i]
		} else {
			c[0] = s[i]
		}
		b = append(b, c...)
	}
	return string(b)
}

// TestReadDocumentEnds: a "..." line ends a document; what follows it up to a "---" line may be
// comments and blank lines only, and a document after a "---" is read as any other.
func TestReadDocumentEnds(t *testing.T) {
	in := "apiVersion: v1\nkind: A\n...\n# between\n\n...\n---\napiVersion: v1\nkind: B\n...\n--- {apiVersion: v1, kind: C}\n...\n"
	docs, err := Read("in.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%s %d %d", d.Object.GetKind(), d.Index, d.Line))
	}
	if diff := cmp.Diff([]string{"A 1 1", "B 2 8", "C 3 11"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReadLeadingBOM: a UTF-8 byte-order mark at the very start of a file is accepted, as it was,
// and is not part of the first document's text: written back, it would be a byte-order mark in
// the middle of the output stream, which the reader refuses.
func TestReadLeadingBOM(t *testing.T) {
	docs, err := Read("in.yaml", []byte("\xef\xbb\xbfapiVersion: v1\nkind: A\n"))
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Kind, Text string
		Line       int
	}
	got := []doc{{docs[0].Object.GetKind(), string(docs[0].Text), docs[0].Line}}
	want := []doc{{"A", "apiVersion: v1\nkind: A\n", 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
}

// TestReadDocuments checks document numbering, lines and the text kept for byte-identical
// pass-through.
func TestReadDocuments(t *testing.T) {
	in := "# header\n---\napiVersion: v1\nkind: A # comment\n---\n---\napiVersion: v1\nkind: B\ndata: {flag: yes}\n--- {apiVersion: v1, kind: C}\n"
	docs, err := Read("in.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	type pos struct {
		Kind        string
		Index, Line int
		Text        string
	}
	var got []pos
	for _, d := range docs {
		got = append(got, pos{d.Object.GetKind(), d.Index, d.Line, string(d.Text)})
	}
	want := []pos{
		{"A", 1, 3, "apiVersion: v1\nkind: A # comment\n"},
		{"B", 2, 7, "apiVersion: v1\nkind: B\ndata: {flag: yes}\n"},
		{"C", 3, 10, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// BenchmarkReadManyKeys guards against the quadratic duplicate-key check of yaml.v3's decoder: a
// ConfigMap with 100,000 keys took 53 s in the function. The bound is generous (the figure is in
// the benchmark); quadratic reading would take minutes.
func BenchmarkReadManyKeys(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		data := manyKeys(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse("cm.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func manyKeys(n int) []byte {
	var sb strings.Builder
	sb.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  key%06d: value\n", i)
	}
	return []byte(sb.String())
}

// TestReadLargeDocuments: the object limit refuses one object over 3 MiB, not a stream or a List
// that large.
func TestReadLargeDocuments(t *testing.T) {
	item := func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\ndata: {k: %s}\n", i, strings.Repeat("x", 1<<10))
	}
	var stream, yamlList, jsonList strings.Builder
	yamlList.WriteString("apiVersion: v1\nkind: List # of ConfigMaps\nitems:\n")
	jsonList.WriteString(`{"apiVersion": "v1", "kind": "List", "items": [`)
	const n = 4000 // about 4.3 MB
	for i := range n {
		stream.WriteString("---\n" + item(i))
		yamlList.WriteString("- " + strings.ReplaceAll(strings.TrimSuffix(item(i), "\n"), "\n", "\n  ") + "\n")
		if i > 0 {
			jsonList.WriteString(",")
		}
		fmt.Fprintf(&jsonList, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d"}}`, i)
	}
	jsonList.WriteString(strings.Repeat(" ", MaxObjectBytes) + "]}\n")
	cases := map[string]struct {
		reason string
		in     string
	}{
		"Stream":   {reason: "the limit is per object, not per file", in: stream.String()},
		"YAMLList": {reason: "a List is applied item by item", in: yamlList.String()},
		"JSONList": {reason: "a List written as JSON", in: jsonList.String()},
		"UnderTheLimit": {reason: "an object of 3 MiB fits",
			in: "apiVersion: v1\nkind: ConfigMap\ndata:\n  k: " + strings.Repeat("x", MaxObjectBytes-100) + "\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if len(tc.in) <= MaxObjectBytes && name != "UnderTheLimit" {
				t.Fatalf("the input is %d bytes, not over the limit", len(tc.in))
			}
			docs, err := Read("in.yaml", []byte(tc.in))
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if want := map[string]int{"UnderTheLimit": 1}[name]; want == 0 && len(docs) != n || want > 0 && len(docs) != want {
				t.Errorf("%s: %d objects read", tc.reason, len(docs))
			}
		})
	}
}

// TestMetadataProblems: the metadata no API server decodes, whatever the kind, each named by its
// field; what the API server and strategic merge patches take (null labels, annotations or
// values) is not a problem.
func TestMetadataProblems(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		at     *field.Path
		want   []string
	}{
		"Good": {
			reason: "strings and mappings of strings",
			in:     "metadata: {name: a, generateName: b-, namespace: c, labels: {k: v}, annotations: {k: v}}",
		},
		"Nulls": {
			reason: "null labels, annotations and values are taken by the API server and mean deletion in a patch",
			in:     "metadata: {name: null, labels: null, annotations: {k: null}}",
		},
		"NoMetadata": {
			reason: "metadata that is not a mapping is ObjectProblem's",
			in:     "metadata: [a]",
		},
		"AnnotationsList": {
			reason: "kustomize refused it in words of its own (wrong node kind), and render passed a ConfigMap with it",
			in:     "metadata: {annotations: [x]}",
			want:   []string{`metadata.annotations: Invalid value: "a list": must be a mapping of strings to strings`},
		},
		"LabelsNumber": {
			reason: "kustomize passed labels: 3 through",
			in:     "metadata: {labels: 3}",
			want:   []string{"metadata.labels: Invalid value: 3: must be a mapping of strings to strings"},
		},
		"NameList": {
			reason: "kustomize read a name that is a list as missing",
			in:     "metadata: {name: [a], namespace: {a: b}, generateName: 1}",
			want: []string{
				`metadata.name: Invalid value: "a list": must be a string`,
				"metadata.generateName: Invalid value: 1: must be a string",
				`metadata.namespace: Invalid value: "a mapping": must be a string`,
			},
		},
		"ValueList": {
			reason: `kustomize built an annotation k: [v] as k: ""`,
			in:     "metadata: {annotations: {k: [v], a: x}, labels: {n: 1, b: true}}",
			want: []string{
				`metadata.labels[b]: Invalid value: true: must be a string; quote it: "true"`,
				`metadata.labels[n]: Invalid value: 1: must be a string; quote it: "1"`,
				`metadata.annotations[k]: Invalid value: "a list": must be a string`,
			},
		},
		"At": {
			reason: "an object inside another is named by its path",
			in:     "metadata: {labels: [a]}",
			at:     field.NewPath("spec", "resources").Index(0),
			want:   []string{`spec.resources[0].metadata.labels: Invalid value: "a list": must be a mapping of strings to strings`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, err := ReadNodes([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			v, err := NodeValue(n[0].Node)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, fe := range MetadataProblems(v.(map[string]any), tc.at) {
				got = append(got, fe.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
