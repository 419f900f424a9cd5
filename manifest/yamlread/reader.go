// Package yamlread is the one YAML reader (manifest re-exports it). render, validate, build, the
// KRM function and the controller's --render-config all read YAML here, the way
// kustomize reads it (kyaml, YAML 1.2 on go.yaml.in/yaml/v3): `yes`, `on` and `y` are strings,
// `0o17` is an octal integer, a duplicate mapping key is an error naming the key and both lines.
// Before it, the CLI read YAML 1.1 through sigs.k8s.io/yaml (a ConfigMap's `flag: yes` became
// `true`, a duplicate key silently kept the last value) while the function read YAML 1.2 and
// refused duplicates: the same bytes meant different things in review and in the build.
//
// The conversion from nodes to values is our own and linear: yaml.v3's decoder checks duplicate
// keys by comparing every key of a mapping with every other (53 s for a ConfigMap with 100,000
// keys); here each mapping keeps a set of its keys.
package yamlread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
)

// Node is one document of a YAML stream, parsed but not yet converted.
type Node struct {
	// Node is the document's content (never the DocumentNode itself); lines are of the whole
	// stream.
	*kyaml.Node
	// Index is the 1-based number of the document among the non-empty documents of the stream,
	// the number a person counts; Line is the 1-based line where its content starts.
	Index, Line int
	// Text is the document exactly as written (without the "---" line), so that an object the
	// render does not own can be written out byte for byte. nil when the document shares a line
	// with its "---" marker.
	Text []byte
}

// Document is one object read from a YAML stream and where it came from.
type Document struct {
	Object *unstructured.Unstructured
	// Index and Line as in Node. The items of a List share their List's Index.
	Index, Line int
	// Text as in Node; nil for the items of a List (they are written out encoded).
	Text []byte
}

// yamlLine finds the line in go-yaml's messages ("yaml: line 3: ..."), to add the document's
// offset in the stream.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// ReadNodes splits a YAML (or JSON) stream into its documents and parses each, skipping empty
// ones. Documents are delimited by "---" lines as the YAML spec defines them (a line starting with
// "---" or "..." followed by a space or its end cannot be content), so each document's text is
// known exactly.
//
// The stream must be UTF-8 (CheckEncoding): go-yaml reads UTF-16 too, from a byte-order mark at
// the start of whatever it is given, so a document after a --- that starts with one was read as
// UTF-16 while every reader after it (kustomize, kubectl, the function's item-by-item reading)
// and every text passed through is UTF-8: a UTF-16 Sandbox rendered a Pod, and its text came out
// as UTF-16 bytes inside a UTF-8 stream. So a UTF-16 or UTF-32 byte-order mark anywhere, and a
// NUL byte anywhere (YAML allows none; UTF-16 or UTF-32 text without a mark shows as NULs), is an
// error naming its document and line and the encoding it suggests. A UTF-8 byte-order mark at
// the very start is accepted and dropped, so it is not written back into the middle of an output
// stream.
//
// A document after a "..." line must start with a "---" line. YAML 1.2 allows a bare document
// there, but kustomize's reader (kyaml's kio.ByteReader) and kubectl's (apimachinery's
// YAMLReader, then sigs.k8s.io/yaml) drop it without a word, and go-yaml itself refuses it ("did
// not find expected <document start>"). Reading it, render would write an object that build (the
// same bytes as kustomize build) never applies; dropping it would lose an object its author
// wrote. So it is an error in every mode, naming its line.
func ReadNodes(data []byte) ([]Node, error) { return readNodes(data, 0) }

// MaxObjectBytes is the largest document Read takes: the API server refuses any request body
// over 3 MiB (k8s.io/apiserver's MaxRequestBodyBytes), and etcd any object over 1.5 MiB by
// default, so a larger object can never be applied. It is checked on the text before parsing:
// parsed, a 10 MB list of one-letter strings took 1.4 GB of nodes and values. (The text of an
// object is not the JSON the API server receives, but an object whose YAML exceeds 3 MiB and whose
// JSON fits in etcd would have to be mostly comments or indentation.)
const MaxObjectBytes = 3 << 20

// listKind finds a List's kind in a document's text, YAML or JSON: a List is not sent to an API
// server as it is but item by item, so a large one is read (its items are not limited).
var listKind = regexp.MustCompile(`(?m)^kind:[ \t]*["']?\w*List["']?[ \t]*(#.*)?\r?$|"kind"\s*:\s*"\w*List"`)

// readNodes is ReadNodes refusing, before parsing it, a document over maxDocument bytes (0: no
// limit) unless it is a List.
func readNodes(data []byte, maxDocument int) ([]Node, error) {
	err := CheckEncoding(data)
	if err != nil && err != errInStream {
		return nil, err
	}
	// Only a stream CheckEncoding found something in is searched again, document by document, to
	// place it.
	place := err == errInStream
	data = bytes.TrimPrefix(data, utf8BOM)
	r := &nodeReader{place: place, maxDocument: maxDocument}
	// A document runs from the line after a marker to the next marker. After "--- value" it
	// starts on the marker's own line: prefix holds that line with the marker blanked out, so
	// columns stay as written.
	start, startLine := 0, 1
	var prefix []byte
	chunk := func(end int) []byte {
		if prefix == nil {
			return data[start:end]
		}
		return append(prefix, data[start:end]...)
	}
	line := 1
	ended := false // the last marker was "..."
	for pos := 0; pos < len(data); line++ {
		next := len(data)
		if end := bytes.IndexByte(data[pos:], '\n'); end >= 0 {
			next = pos + end + 1
		}
		if l := data[pos:next]; IsDocumentMarker(l) {
			if err := r.parse(chunk(pos), startLine, prefix == nil, ended); err != nil {
				return nil, err
			}
			ended = l[0] == '.'
			prefix, start, startLine = nil, next, line+1
			if rest := bytes.TrimSpace(l[3:]); l[0] == '-' && len(rest) > 0 && rest[0] != '#' {
				prefix = append([]byte("   "), l[3:]...)
				startLine = line
			}
		}
		pos = next
	}
	if err := r.parse(chunk(len(data)), startLine, prefix == nil, ended); err != nil {
		return nil, err
	}
	return r.out, nil
}

// nodeReader is readNodes' state across the documents of a stream: the nodes read so far and
// how many, and what every document is checked for.
type nodeReader struct {
	// place: the stream has a character CheckEncoding refuses, to be placed in its document.
	place       bool
	maxDocument int
	index       int
	out         []Node
}

// parse reads one document's text (chunk, starting on line firstLine), adding its node unless
// it is empty; withText keeps the text with it, and bare says the chunk follows a "..." line with
// no "---" line since.
func (r *nodeReader) parse(chunk []byte, firstLine int, withText, bare bool) error {
	if r.place {
		if at, msg := notUTF8(chunk); at >= 0 {
			return fmt.Errorf("document %d, line %d: %s", r.index+1, firstLine+bytes.Count(chunk[:at], []byte("\n")), msg)
		}
	}
	if len(bytes.TrimSpace(chunk)) == 0 {
		return nil
	}
	if r.maxDocument > 0 && len(chunk) > r.maxDocument && !listKind.Match(chunk) {
		return fmt.Errorf("document %d (line %d) is %d bytes: no API server takes an object over %d bytes (3 MiB, its request limit), so it could never be applied; split it",
			r.index+1, firstLine, len(chunk), r.maxDocument)
	}
	dec := kyaml.NewDecoder(bytes.NewReader(chunk))
	var doc kyaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return syntaxError(err, chunk, r.index+1, firstLine)
	}
	if bare && len(doc.Content) > 0 {
		return fmt.Errorf("document %d, line %d: a document after a ... line (the end of the one before) must start with a --- line: "+
			"kustomize and kubectl drop it without a word, and other YAML readers refuse it; add a line --- before it",
			r.index+1, doc.Content[0].Line+firstLine-1)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil
	}
	var extra kyaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return syntaxError(err, chunk, r.index+1, firstLine)
		}
		return fmt.Errorf("document %d (line %d): more than one document; separate documents with a line ---", r.index+1, firstLine)
	}
	r.index++
	content := doc.Content[0]
	Shift(content, firstLine-1, 0)
	n := Node{Node: content, Index: r.index, Line: content.Line}
	if withText {
		n.Text = chunk
	}
	r.out = append(r.out, n)
	return nil
}

// utf8BOM is U+FEFF, the byte-order mark, in UTF-8.
var utf8BOM = []byte("\xef\xbb\xbf")

const midStreamBOM = "a byte-order mark (U+FEFF) inside the stream; YAML input is UTF-8 with a byte-order mark at most at its very start: remove it"

// errInStream is CheckEncoding finding, past the start of the stream, what ReadNodes then places
// at its document and line (notUTF8).
var errInStream = errors.New(midStreamBOM)

// wideEncoding is a UTF-16 or UTF-32 encoding: its name, its byte-order mark, and its name for
// iconv without a mark (which iconv cannot guess the byte order from).
type wideEncoding struct {
	name  string
	bom   []byte
	iconv string
}

// wideEncodings, UTF-32LE before UTF-16LE: its mark starts with the other's.
var wideEncodings = []wideEncoding{
	{"UTF-32 (little-endian)", []byte{0xff, 0xfe, 0, 0}, "UTF-32LE"},
	{"UTF-32 (big-endian)", []byte{0, 0, 0xfe, 0xff}, "UTF-32BE"},
	{"UTF-16 (little-endian)", []byte{0xff, 0xfe}, "UTF-16LE"},
	{"UTF-16 (big-endian)", []byte{0xfe, 0xff}, "UTF-16BE"},
}

// CheckEncoding refuses a stream that is not UTF-8: one starting with a UTF-16 or UTF-32
// byte-order mark; or holding, past its start, a byte-order mark (a file concatenated from files
// with one, or a U+FEFF typed into a value, which no YAML reader shows), a UTF-16 or UTF-32 one
// included, or a NUL byte. A mark at the start is named at document 1, line 1; anything past it
// is errInStream, which ReadNodes places at its document and line (CheckEncoding does not know
// them). The caller adds the file. Other invalid UTF-8 is left to the YAML parser, which reports
// it.
func CheckEncoding(data []byte) error {
	for _, enc := range wideEncodings {
		if bytes.HasPrefix(data, enc.bom) {
			return fmt.Errorf("document 1, line 1: the input is %s (it starts with that byte-order mark); YAML input must be UTF-8: convert it, say with iconv -f %s -t UTF-8",
				enc.name, strings.Fields(enc.name)[0])
		}
	}
	if at, _ := notUTF8(bytes.TrimPrefix(data, utf8BOM)); at >= 0 {
		return errInStream
	}
	return nil
}

// notUTF8 finds the first byte-order mark (UTF-8, UTF-16 or UTF-32) or NUL byte in a document's
// text, and says what it is; at is -1 when there is none. The bytes 0xfe and 0xff never occur in
// UTF-8, so a UTF-16 mark is never part of a character; a NUL is not allowed in YAML at all.
func notUTF8(text []byte) (at int, msg string) {
	at = -1
	for _, b := range [][]byte{utf8BOM, {0}, {0xff, 0xfe}, {0xfe, 0xff}} {
		if i := bytes.Index(text, b); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return -1, ""
	}
	if bytes.HasPrefix(text[at:], utf8BOM) {
		return at, midStreamBOM
	}
	for _, enc := range wideEncodings {
		if bytes.HasPrefix(text[at:], enc.bom) {
			return at, fmt.Sprintf("a %s byte-order mark: the text after it is %s, and YAML input must be UTF-8: convert that text, say with iconv -f %s -t UTF-8",
				enc.name, strings.Fields(enc.name)[0], strings.Fields(enc.name)[0])
		}
	}
	if enc := unmarkedWide(text); enc != nil {
		return at, fmt.Sprintf("a NUL byte: the text looks like %s without a byte-order mark, and YAML input must be UTF-8: convert it, say with iconv -f %s -t UTF-8",
			enc.name, enc.iconv)
	}
	return at, "a NUL byte, which YAML does not allow: remove it (text in UTF-16 or UTF-32 shows as NUL bytes: convert such text to UTF-8)"
}

// unmarkedWide guesses the encoding of a document that starts without a byte-order mark as YAML
// 1.2 does (5.2, Character Encodings), from its first bytes, an ASCII character in any of them;
// nil when they are not of UTF-16 or UTF-32.
func unmarkedWide(text []byte) *wideEncoding {
	pick := func(iconv string) *wideEncoding {
		for i := range wideEncodings {
			if wideEncodings[i].iconv == iconv {
				return &wideEncodings[i]
			}
		}
		return nil
	}
	switch {
	case len(text) >= 4 && text[0] == 0 && text[1] == 0 && text[2] == 0 && text[3] != 0:
		return pick("UTF-32BE")
	case len(text) >= 4 && text[0] != 0 && text[1] == 0 && text[2] == 0 && text[3] == 0:
		return pick("UTF-32LE")
	case len(text) >= 2 && text[0] == 0 && text[1] != 0:
		return pick("UTF-16BE")
	case len(text) >= 2 && text[0] != 0 && text[1] == 0:
		return pick("UTF-16LE")
	}
	return nil
}

// IsDocumentMarker reports whether a line is a document marker: "---" or "..." at the start of
// the line, followed by whitespace or the end of the line. Readers that cut a stream by lines
// (this one, and the KRM function's item-by-item reading) must not cut inside one.
func IsDocumentMarker(l []byte) bool {
	if len(l) < 3 || !(bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("..."))) {
		return false
	}
	return len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\n' || l[3] == '\r'
}

// syntaxError places a YAML syntax error. go-yaml reports a parser error on the line where the
// enclosing block starts (a bad indentation on line 11 is reported on line 7), so the line is
// found again: the first line whose prefix of the document fails with the same problem (a binary
// search, so a few parses, and only on the error path).
func syntaxError(err error, chunk []byte, index, firstLine int) error {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("document %d (from line %d): YAML syntax: %s", index, firstLine, strings.TrimPrefix(msg, "yaml: "))
	}
	problem := msg[len(m[0]):]
	reported, _ := strconv.Atoi(m[1])
	ends := lineEnds(chunk)
	fails := func(lines int) bool {
		var n kyaml.Node
		err := kyaml.NewDecoder(bytes.NewReader(chunk[:ends[lines-1]])).Decode(&n)
		if err == nil || errors.Is(err, io.EOF) {
			return false
		}
		pm := yamlLine.FindStringSubmatch(err.Error())
		return pm != nil && err.Error()[len(pm[0]):] == problem
	}
	lo, hi := max(reported, 1), len(ends) // the first failing prefix is in [lo, hi]
	if lo > hi || !fails(hi) {
		return fmt.Errorf("document %d, line %d: YAML syntax: %s", index, reported+firstLine-1, problem)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return fmt.Errorf("document %d, line %d: YAML syntax: %s", index, lo+firstLine-1, problem)
}

// lineEnds are the byte offsets just after each line of b.
func lineEnds(b []byte) []int {
	var out []int
	for i, c := range b {
		if c == '\n' {
			out = append(out, i+1)
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		out = append(out, len(b))
	}
	return out
}

// Shift moves the positions of a node parsed on its own to where its text sits in a larger
// stream: lines down, columns right. Aliases are not followed (yaml.v3 keeps the node an alias
// names under Alias, not Content), so every node is visited once.
func Shift(n *kyaml.Node, lines, columns int) {
	n.Line += lines
	n.Column += columns
	for _, c := range n.Content {
		Shift(c, lines, columns)
	}
}

func isNull(n *kyaml.Node) bool {
	return n.Kind == kyaml.ScalarNode && n.ShortTag() == "!!null"
}

// Read reads a YAML (or JSON) stream of objects: every non-empty document must be a mapping with
// apiVersion and kind; a List (a kind ending in List, with items) is flattened into its items, and
// its items must be a list. A document over MaxObjectBytes is refused unparsed.
// name is used in error messages only, which name the 1-based document and the line.
func Read(name string, data []byte) ([]Document, error) {
	nodes, err := readNodes(data, MaxObjectBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []Document
	for _, n := range nodes {
		docs, err := ReadDocument(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, docs...)
	}
	return out, nil
}

// ReadDocument is Read on one document of a stream: its object, or a List's items. Errors start
// with "document N". A reader of files that hold other YAML too (kustomize's patches and
// kustomizations) checks the documents that are objects with it, as Read would.
func ReadDocument(n Node) ([]Document, error) {
	u, err := NodeObject(n.Node)
	if err != nil {
		return nil, fmt.Errorf("document %d, %w", n.Index, err)
	}
	items, isList := u.Object["items"].([]any)
	if v := u.Object["items"]; !isList && v != nil && strings.HasSuffix(u.GetKind(), "List") {
		// Passed through, it is an object of a kind no API server serves (kubectl refuses to
		// decode it): a List's items are a list.
		return nil, fmt.Errorf("document %d (line %d): items of the %s: must be a list of objects, not %s",
			n.Index, n.Line, u.GetKind(), DescribeValue(v))
	}
	if !isList || !strings.HasSuffix(u.GetKind(), "List") {
		return []Document{{Object: u, Index: n.Index, Line: n.Line, Text: n.Text}}, nil
	}
	out := make([]Document, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d (line %d): items[%d] of the %s: every item must be an object with apiVersion and kind",
				n.Index, n.Line, i, u.GetKind())
		}
		if msg := checkObject(m); msg != "" {
			return nil, fmt.Errorf("document %d (line %d): items[%d] of the %s: %s", n.Index, n.Line, i, u.GetKind(), msg)
		}
		out = append(out, Document{Object: &unstructured.Unstructured{Object: m}, Index: n.Index, Line: n.Line})
	}
	return out, nil
}

// Parse is Read without the positions.
func Parse(name string, data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := Read(name, data)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		out[i] = d.Object
	}
	return out, nil
}

// NodeObject converts a parsed object (a mapping with apiVersion and kind) into an unstructured
// object. Errors start with "line N:".
func NodeObject(n *kyaml.Node) (*unstructured.Unstructured, error) {
	if n.Kind == kyaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != kyaml.MappingNode {
		return nil, fmt.Errorf("line %d: an object must be a mapping with apiVersion and kind, not %s", n.Line, DescribeNode(n))
	}
	v, err := NodeValue(n)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: v.(map[string]any)}
	if key, msg := ObjectProblem(u.Object); msg != "" {
		// At the field's line when it is written (metadata: [a] three lines down), else at the
		// object's.
		line := n.Line
		if l := FieldLine(n, key); l > 0 {
			line = l
		}
		return nil, fmt.Errorf("line %d: %s", line, msg)
	}
	return u, nil
}

// checkObject says what makes a value not a Kubernetes object, or "".
func checkObject(obj map[string]any) string {
	_, msg := ObjectProblem(obj)
	return msg
}

// ObjectProblem says what makes a value not a Kubernetes object, and the field at fault
// (apiVersion, kind or metadata); "", "" for an object. Read checks every document with it; a
// caller holding objects read otherwise (a SandboxRender's spec.resources) checks them the same.
func ObjectProblem(obj map[string]any) (field, msg string) {
	for _, k := range []string{"apiVersion", "kind"} {
		s, isString := obj[k].(string)
		if !isString || s == "" {
			return k, fmt.Sprintf("every object needs apiVersion and kind (strings); %s is %s", k, DescribeValue(obj[k]))
		}
	}
	// The API server (and every client) reads apiVersion as group/version or version: "a/b/c" or
	// "example.com/" passed through as an object no request can carry.
	if gv, err := schema.ParseGroupVersion(obj["apiVersion"].(string)); err != nil || gv.Version == "" {
		return "apiVersion", fmt.Sprintf("apiVersion %q must be a version (v1) or a group and a version (apps/v1)", obj["apiVersion"])
	}
	// Every Kubernetes object's metadata is an ObjectMeta; anything else would be refused by any
	// API server (and trips up tools that read annotations: kyaml's accessors index a list there
	// as a mapping's keys and values, and panicked on metadata: [a]). Written as null (or as
	// "metadata:" and nothing after it), it is no mapping either: kustomize refuses it (missing
	// metadata.name), and so does the API server; left out, it is the object's business.
	if md, present := obj["metadata"]; present {
		if _, isMap := md.(map[string]any); !isMap {
			what := DescribeValue(md)
			if md == nil {
				what = "empty (null)"
			}
			return "metadata", fmt.Sprintf("metadata must be a mapping (name, namespace, labels, ...), not %s", what)
		}
	}
	return "", ""
}

// MetadataProblems are the fields of an object's metadata that no API server decodes into an
// ObjectMeta, whatever the kind: name, generateName and namespace that are not strings, labels
// and annotations that are not mappings of strings to strings. kustomize reads them with kyaml,
// which takes a list or a mapping where a string belongs for "" (a ConfigMap's annotation k: [v]
// came out of a build as k: ""), an annotations list for an error of its own words, and a
// labels list for labels. null is taken where the API server takes it: for labels or
// annotations as a whole (none), and for a value in them (a strategic merge patch deletes the
// key so). What ObjectProblem refuses (metadata that is not a mapping) is not repeated here. at
// is the object's path in a larger one (spec.resources[0]), nil for an object of its own.
//
// The render checks the agent-sandbox kinds' metadata further, as the API server does
// (manifest's validateMetadata: every key, owner references, names as DNS subdomains); these
// are the checks for every other object, the ones it passes through.
func MetadataProblems(obj map[string]any, at *field.Path) field.ErrorList {
	md, _ := obj["metadata"].(map[string]any)
	if len(md) == 0 {
		return nil
	}
	p := at.Child("metadata")
	var errs field.ErrorList
	for _, k := range []string{"name", "generateName", "namespace"} {
		if v := md[k]; v != nil {
			if _, isString := v.(string); !isString {
				errs = append(errs, field.Invalid(p.Child(k), shownValue(v), "must be a string"))
			}
		}
	}
	for _, k := range []string{"labels", "annotations"} {
		v := md[k]
		if v == nil {
			continue
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			errs = append(errs, field.Invalid(p.Child(k), shownValue(v), "must be a mapping of strings to strings"))
			continue
		}
		keys := make([]string, 0, len(m))
		for key := range m {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			switch v := m[key].(type) {
			case string, nil:
			case bool, int64, float64:
				errs = append(errs, field.Invalid(p.Child(k).Key(key), v, fmt.Sprintf("must be a string; quote it: %q", fmt.Sprint(v))))
			default:
				errs = append(errs, field.Invalid(p.Child(k).Key(key), shownValue(v), "must be a string"))
			}
		}
	}
	return errs
}

// shownValue is a value as a field error shows it: scalars as they are, lists and mappings by
// what they are (never Go's rendering of a map).
func shownValue(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return DescribeValue(v)
	}
	return v
}

// NodeValue converts a YAML node into the JSON-typed value unstructured objects hold (string,
// bool, int64, float64, nil, []any, map[string]any). Aliases are expanded, within a budget so a
// "billion laughs" document is an error instead of an out-of-memory crash; merge keys (<<) are
// applied as kyaml applies them.
func NodeValue(n *kyaml.Node) (any, error) {
	// Without aliases every node is converted once: no budget to count (counting needs a set of
	// the nodes seen, the costliest part of converting a small object).
	budget := math.MaxInt
	if hasAlias(n) {
		budget = 4*countNodes(n, map[*kyaml.Node]bool{}) + 10000
	}
	c := &converter{budget: budget, active: map[*kyaml.Node]bool{}}
	return c.value(n)
}

func hasAlias(n *kyaml.Node) bool {
	if n.Kind == kyaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

func countNodes(n *kyaml.Node, seen map[*kyaml.Node]bool) int {
	if n == nil || seen[n] {
		return 0
	}
	seen[n] = true
	total := 1
	for _, c := range n.Content {
		total += countNodes(c, seen)
	}
	return total
}

type converter struct {
	budget int
	active map[*kyaml.Node]bool
}

func (c *converter) value(n *kyaml.Node) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, fmt.Errorf("line %d: aliases expand to too many values; write the values out instead", n.Line)
	}
	switch n.Kind {
	case kyaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case kyaml.AliasNode:
		if n.Alias == nil || c.active[n.Alias] {
			return nil, fmt.Errorf("line %d: alias *%s refers to a value that contains it", n.Line, n.Value)
		}
		c.active[n.Alias] = true
		defer delete(c.active, n.Alias)
		return c.value(n.Alias)
	case kyaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			v, err := c.value(e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case kyaml.MappingNode:
		return c.mapping(n)
	case kyaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func (c *converter) mapping(n *kyaml.Node) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*kyaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == kyaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != kyaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a mapping key must be a plain value, not %s", k.Line, DescribeNode(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		key := k.Value
		if first, dup := lines[key]; dup {
			return nil, fmt.Errorf("line %d: mapping key %s already defined at line %d", k.Line, quote.Value(key), first)
		}
		lines[key] = k.Line
		val, err := c.value(v)
		if err != nil {
			return nil, err
		}
		out[key] = val
	}
	// Merge keys: explicit keys win, then earlier merged mappings over later ones.
	for _, m := range merges {
		sources := []*kyaml.Node{m}
		if m.Kind == kyaml.SequenceNode {
			sources = m.Content
		}
		for _, s := range sources {
			v, err := c.value(s)
			if err != nil {
				return nil, err
			}
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("line %d: a merge key (<<) needs a mapping or a list of mappings", s.Line)
			}
			for k, e := range mm {
				if _, set := out[k]; !set {
					out[k] = e
				}
			}
		}
	}
	return out, nil
}

// scalar resolves a scalar as YAML 1.2 (go-yaml v3, as kyaml) and returns it as a JSON type.
func scalar(n *kyaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		// A timestamp stays the string it is written as, as kyaml reads it.
		return n.Value, nil
	case "!!null":
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("line %d: %s", n.Line, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	switch t := v.(type) {
	case int:
		return int64(t), nil
	case int64:
		return t, nil
	case uint64:
		if t <= math.MaxInt64 {
			return int64(t), nil
		}
		return float64(t), nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, fmt.Errorf("line %d: %s is not a number an API server accepts (JSON has no infinity or NaN)", n.Line, n.Value)
		}
		return t, nil
	case string, bool, nil:
		return t, nil
	case []byte:
		return string(t), nil
	default:
		return n.Value, nil
	}
}

// DescribeNode says what a node is, for a message naming what was found where something else was
// wanted: "a list", "a mapping", "an alias", "empty" for null, else the value, quoted and cut as
// quote.Value cuts it.
func DescribeNode(n *kyaml.Node) string {
	switch n.Kind {
	case kyaml.SequenceNode:
		return "a list"
	case kyaml.MappingNode:
		return "a mapping"
	case kyaml.AliasNode:
		return "an alias"
	}
	if isNull(n) {
		return "empty"
	}
	return "the value " + quote.Value(n.Value)
}

// DescribeValue says what a value read from YAML is, for messages ("the string \"x\"", "a
// list", ...).
func DescribeValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "missing"
	case string:
		if t == "" {
			return "empty"
		}
		return "the string " + quote.Value(t)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%v", t)
	}
}
