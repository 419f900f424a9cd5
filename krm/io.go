package krm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
)

// Run is the function's I/O: it reads a ResourceList from in, processes it and writes the result
// to out, streaming one item at a time. It returns the results as an error when one of them is an
// error (the function then exits non-zero), after writing the output.
//
// kyaml's framework.Execute would hold the list as nodes, objects and output nodes at once, and
// serialise it as one YAML document; on tens of thousands of items that costs more than the
// render itself. Here the list is held once: each item's nodes are let go as soon as the item is
// read into an object and its text is cut out of the input; items passed through are written as
// that text, rendered ones are encoded a batch at a time as they are written and then let go.
func Run(in io.Reader, out io.Writer) error {
	_, err := RunResults(in, out)
	return err
}

// RunResults is Run also returning the results it wrote when none is an error (warnings), for a
// caller that reports them elsewhere too: kustomize drops the results of a function that
// succeeds, so sandbox-render build has the function hand them over (see kbuild.ResultsDirFlag).
func RunResults(in io.Reader, out io.Writer) (framework.Results, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("reading the ResourceList: %w", err)
	}
	rl, srcs, texts, ok := readSplit(data)
	if !ok {
		var root *kyaml.Node
		var bad *framework.Result
		if rl, root, bad = readResourceList(data); bad != nil {
			rl := framework.Results{bad}
			if err := writeMalformed(out, root, rl); err != nil {
				return nil, err
			}
			return nil, rl
		}
		if srcs, texts, err = readItems(data, root, rl.Items); err != nil {
			return nil, err
		}
		rl.Items = nil
	}
	res, procErr := process(rl.FunctionConfig, srcs, &rl.Results, true)
	if err := write(out, rl, texts, res); err != nil {
		return nil, err
	}
	if procErr != nil {
		return nil, procErr
	}
	if rl.Results.ExitCode() != 0 {
		return nil, rl.Results
	}
	return rl.Results, nil
}

// readItems reads the listed items into objects and finds the text each is written back as: its
// text in the input, or kyaml's encoding of it when the text cannot be cut out. Each item's nodes
// are let go once it is read (the slice's entries are cleared), so the list is never held as
// nodes and objects at once.
func readItems(data []byte, root *kyaml.Node, nodes []*kyaml.RNode) ([]source, [][]byte, error) {
	pos := make([]itemPos, len(nodes))
	for i, n := range nodes {
		pos[i] = posOf(n.YNode())
	}
	texts := sourceTexts(data, pos, keyAfterItems(root))
	srcs := make([]source, len(nodes))
	errs := make([]error, len(nodes))
	parallel.Each(len(nodes), func(i int) {
		n := nodes[i]
		srcs[i] = readSource(n.YNode())
		if texts[i] == nil {
			var s string
			s, errs[i] = n.String()
			texts[i] = []byte(s)
		}
		nodes[i] = nil
	})
	return srcs, texts, errors.Join(errs...)
}

// keyAfterItems is the 0-based line of the first top-level key after items (where the items'
// text ends), or a line past any input. A line at the start of a line is not necessarily a key:
// a flow value may run over several lines, "}" alone at the start of one.
func keyAfterItems(root *kyaml.Node) int {
	itemsAt, next := -1, int(^uint(0)>>1)
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Value == "items" {
			itemsAt = k.Line
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if l := root.Content[i].Line; l > itemsAt && itemsAt >= 0 {
			next = min(next, l-1)
		}
	}
	return next
}

// ResourceList apiVersions the KRM functions specification defines.
var resourceListVersions = []string{"config.kubernetes.io/v1", "config.kubernetes.io/v1beta1"}

// readResourceList reads the function's input strictly. A ResourceList that is malformed (not one
// YAML document, not a mapping, another kind, a duplicate key, items that are not a list of
// objects, a functionConfig that is not an object, results that are not a list of results) is
// answered with an error result and, as the KRM functions specification asks, the items
// unchanged: the input's ResourceList is given back as it came, results added (root). Only an
// input that holds no ResourceList go-yaml can read (not YAML, not a mapping, another kind) is
// answered with a ResourceList of the result alone: it has no items to give back. kyaml's reader would instead explode an items mapping into a list
// of its keys and values, or nest a second ResourceList as items.
func readResourceList(data []byte) (*framework.ResourceList, *kyaml.Node, *framework.Result) {
	docs, err := manifest.ReadNodes(data)
	switch {
	case err != nil:
		return nil, firstResourceList(data), malformed("%v", err)
	case len(docs) == 0:
		return nil, nil, malformed("the input is empty; a KRM function reads one ResourceList (kind: ResourceList, apiVersion: config.kubernetes.io/v1)")
	case len(docs) > 1:
		_, root, _ := checkRoot(docs[0].Node)
		return nil, root, malformed("the input has %d YAML documents; a KRM function reads one ResourceList", len(docs))
	}
	return checkRoot(docs[0].Node)
}

// malformed is the result answering a malformed ResourceList.
func malformed(format string, args ...any) *framework.Result {
	return &framework.Result{Severity: framework.Error, Message: "malformed ResourceList: " + fmt.Sprintf(format, args...)}
}

// firstResourceList is the input's first document as go-yaml reads it, when the one reader
// refuses the input (a byte-order mark inside a value, a document after "..." with no "---", a
// syntax error in a later document) but that document is a ResourceList: its items are given back
// unchanged. nil when there is none, or when the input starts with a UTF-16 byte-order mark:
// go-yaml would read it, and the items written back would be converted, not unchanged.
func firstResourceList(data []byte) *kyaml.Node {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return nil
	}
	// Only the first document's text: go-yaml reads ahead, and would fail on what follows before
	// it returns the first document.
	var doc kyaml.Node
	if err := kyaml.NewDecoder(bytes.NewReader(firstDocument(data))).Decode(&doc); err != nil || len(doc.Content) != 1 {
		return nil
	}
	_, root, _ := checkRoot(doc.Content[0])
	return root
}

// firstDocument is the text of a stream up to the first document marker after some content.
func firstDocument(data []byte) []byte {
	content := false
	for pos := 0; pos < len(data); {
		next := len(data)
		if end := bytes.IndexByte(data[pos:], '\n'); end >= 0 {
			next = pos + end + 1
		}
		l := data[pos:next]
		rest := bytes.TrimSpace(l)
		if yamlread.IsDocumentMarker(l) {
			if content {
				return data[:pos]
			}
			rest = bytes.TrimSpace(l[3:]) // "--- value": the document starts on the marker's line
		}
		if len(rest) > 0 && rest[0] != '#' && rest[0] != '%' {
			content = true
		}
		pos = next
	}
	return data
}

// checkRoot is readResourceList on the parsed document. root is nil when the document is not a
// ResourceList at all (not a mapping, another kind): the answer is then a ResourceList of its own,
// holding only the result. A ResourceList malformed inside comes back unchanged.
func checkRoot(root *kyaml.Node) (*framework.ResourceList, *kyaml.Node, *framework.Result) {
	bad := malformed
	if root.Kind != kyaml.MappingNode {
		return nil, nil, bad("line %d: the input must be a ResourceList object, not %s", root.Line, nodeKind(root))
	}
	if kind := child(root, "kind"); kind == nil || kind.Kind != kyaml.ScalarNode || kind.Value != "ResourceList" {
		return nil, nil, bad("line %d: kind must be ResourceList", root.Line)
	}
	if v := child(root, "apiVersion"); v == nil || v.Kind != kyaml.ScalarNode || !slices.Contains(resourceListVersions, v.Value) {
		return nil, root, bad("line %d: apiVersion must be one of %s", root.Line, strings.Join(resourceListVersions, ", "))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != kyaml.ScalarNode {
			return nil, root, bad("line %d: a key must be a plain value", k.Line)
		}
		if first, dup := seen[k.Value]; dup {
			return nil, root, bad("line %d: key %q already defined at line %d", k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		// The items are read one by one (readSource), the functionConfig by renderconfig; any
		// other value (metadata, results) is read here, as the one reader reads a whole
		// ResourceList given to render: a duplicate key in it made render fail and the
		// function succeed on the same bytes.
		if k.Value != "items" && k.Value != "functionConfig" {
			if _, err := yamlread.NodeValue(v); err != nil {
				return nil, root, bad("%s: %v", k.Value, err)
			}
		}
	}
	rl := &framework.ResourceList{}
	if items := child(root, "items"); items != nil && !isNullNode(items) {
		if items.Kind != kyaml.SequenceNode {
			return nil, root, bad("line %d: items must be a list of objects, not %s", items.Line, nodeKind(items))
		}
		for i, it := range items.Content {
			if it.Kind != kyaml.MappingNode {
				return nil, root, bad("line %d: items[%d] must be an object (a mapping with apiVersion and kind), not %s", it.Line, i, nodeKind(it))
			}
			rl.Items = append(rl.Items, kyaml.NewRNode(it))
		}
	}
	if fc := child(root, "functionConfig"); fc != nil && !isNullNode(fc) {
		if fc.Kind != kyaml.MappingNode {
			return nil, root, bad("line %d: functionConfig must be an object, not %s", fc.Line, nodeKind(fc))
		}
		rl.FunctionConfig = kyaml.NewRNode(fc)
	}
	// The results of a function before this one: the answer carries this one's results only, but
	// results that are not a list of results are as malformed as items that are not objects
	// (results: a passed without a word).
	if res := child(root, "results"); res != nil && !isNullNode(res) {
		if res.Kind != kyaml.SequenceNode {
			return nil, root, bad("line %d: results must be a list of results (mappings with message and severity), not %s", res.Line, nodeKind(res))
		}
		for i, r := range res.Content {
			if r.Kind != kyaml.MappingNode {
				return nil, root, bad("line %d: results[%d] must be a result (a mapping with message and severity), not %s", r.Line, i, nodeKind(r))
			}
		}
	}
	return rl, root, nil
}

// writeMalformed answers a malformed ResourceList: the input mapping with results set, or, when
// the input is not even a mapping, a ResourceList holding only the results.
func writeMalformed(out io.Writer, root *kyaml.Node, results framework.Results) error {
	b, err := yaml.Marshal(results)
	if err != nil {
		return err
	}
	var res kyaml.Node
	if err := kyaml.Unmarshal(b, &res); err != nil {
		return err
	}
	answer := &kyaml.Node{Kind: kyaml.MappingNode}
	if root != nil {
		// Every results key of the input is replaced (a duplicated one too).
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := root.Content[i]; k.Kind != kyaml.ScalarNode || k.Value != "results" {
				answer.Content = append(answer.Content, k, root.Content[i+1])
			}
		}
	} else {
		str := func(s string) *kyaml.Node { return &kyaml.Node{Kind: kyaml.ScalarNode, Value: s} }
		answer.Content = []*kyaml.Node{str("apiVersion"), str(resourceListVersions[0]), str("kind"), str("ResourceList"),
			str("items"), {Kind: kyaml.SequenceNode, Style: kyaml.FlowStyle}}
	}
	answer.Content = append(answer.Content, &kyaml.Node{Kind: kyaml.ScalarNode, Value: "results"}, res.Content[0])
	enc := kyaml.NewEncoder(out)
	if err := enc.Encode(answer); err != nil {
		return err
	}
	return enc.Close()
}

func isNullNode(n *kyaml.Node) bool {
	return n.Kind == kyaml.ScalarNode && n.ShortTag() == "!!null"
}

// nodeKind is yamlread.DescribeNode, except that a scalar is shown as written, null included
// ("the value \"~\""), and whole: the function's messages have always said so, and changing them
// is a change of its own.
func nodeKind(n *kyaml.Node) string {
	if n.Kind == kyaml.ScalarNode {
		return fmt.Sprintf("the value %q", n.Value)
	}
	return yamlread.DescribeNode(n)
}

// itemPos is where an item's node starts in the input, and whether it is written in flow style.
type itemPos struct {
	line, column int
	flow         bool
}

func posOf(n *kyaml.Node) itemPos {
	return itemPos{line: n.Line, column: n.Column, flow: n.Style&kyaml.FlowStyle != 0}
}

// sourceTexts finds, for each item of a block-style ResourceList, its text exactly as it was in
// the input (without the "- " and the indentation of the items list), so that items passed
// through come out byte for byte and need no encoding. end is the 0-based line of the list's
// next top-level key (or past the input's last line): the items' text stops there. Items it
// cannot delimit safely (flow style, JSON, several on one line, a line outside the item's
// indentation) are left out and get encoded.
func sourceTexts(data []byte, items []itemPos, end int) [][]byte {
	out := make([][]byte, len(items))
	lines := bytes.SplitAfter(data, []byte("\n"))
	end = min(end, len(lines)) // exclusive, 0-based: where the text of the current item stops
	for k := len(items) - 1; k >= 0; k-- {
		y := items[k]
		start := y.line - 1
		if y.flow || y.line == 0 || y.column < 3 || start >= end {
			end = start
			continue
		}
		indent := y.column - 1 // the item's keys start here; "- " sits just before
		start = headComments(lines, start, indent)
		first := lines[start]
		if len(first) < indent || string(first[indent-2:indent]) != "- " {
			end = start
			continue
		}
		var b bytes.Buffer
		size := 0
		for _, l := range lines[start:end] {
			size += len(l)
		}
		b.Grow(size) // held until written: no room to spare
		ok := true
		for i := start; i < end && ok; i++ {
			l := lines[i]
			switch {
			case i == start:
				b.Write(l[indent:])
			case blank(l):
				b.Write(dedentBlank(l, indent))
			case len(l) >= indent && len(bytes.TrimLeft(l[:indent], " ")) == 0:
				b.Write(l[indent:])
			default:
				ok = false // something outside the item's indentation: not ours to cut
			}
		}
		if ok {
			out[k] = b.Bytes()
		}
		end = start
	}
	return out
}

// headComments moves an item's start up over the comments written before its first key, when
// they begin on its "- " line ("- # note" then the keys), so they pass through too.
func headComments(lines [][]byte, start, indent int) int {
	j := start - 1
	for j >= 0 && len(lines[j]) > indent && len(bytes.TrimLeft(lines[j][:indent], " ")) == 0 && lines[j][indent] == '#' {
		j--
	}
	if j >= 0 && isDashComment(lines[j], indent) {
		return j
	}
	return start
}

// isDashComment reports whether a line is "- # ..." with the dash at indent-2.
func isDashComment(l []byte, indent int) bool {
	return len(l) > indent && indent >= 2 && len(bytes.TrimLeft(l[:indent-2], " ")) == 0 &&
		string(l[indent-2:indent]) == "- " && l[indent] == '#'
}

// writeBatch is how many items are encoded at once, on every core, before they are written and
// let go: enough to keep the cores busy, few enough that the encoded text is never all held.
const writeBatch = 1024

// write writes the output ResourceList: items a batch at a time, each passed-through item as its
// text, each rendered one encoded, and each let go once written.
func write(out io.Writer, rl *framework.ResourceList, texts [][]byte, items []item) error {
	w := bufio.NewWriterSize(out, 1<<20)
	w.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n")
	// No items is an empty list: "items:" alone is null, not the list the input gave.
	if len(items) == 0 {
		w.WriteString("items: []\n")
	} else {
		w.WriteString("items:\n")
	}
	for start := 0; start < len(items); start += writeBatch {
		batch := items[start:min(start+writeBatch, len(items))]
		encoded, err := encodeAll(batch, texts)
		if err != nil {
			return err
		}
		for i, text := range encoded {
			writeIndented(w, "- ", text)
			if src := batch[i].src; src >= 0 {
				texts[src] = nil
			}
		}
		clear(batch)
	}
	if rl.FunctionConfig != nil {
		s, err := rl.FunctionConfig.String()
		if err != nil {
			return err
		}
		w.WriteString("functionConfig:\n")
		writeIndented(w, "  ", []byte(s))
	}
	if len(rl.Results) > 0 {
		w.WriteString("results:\n")
		if err := writeResults(w, rl.Results); err != nil {
			return err
		}
	}
	return w.Flush()
}

// encodeAll serialises items on every core; on large lists encoding costs as much as the render.
func encodeAll(items []item, texts [][]byte) ([][]byte, error) {
	out := make([][]byte, len(items))
	errs := make([]error, len(items))
	parallel.Each(len(items), func(i int) {
		it := items[i]
		switch {
		case it.src >= 0:
			out[i] = texts[it.src]
		case it.text != nil:
			out[i] = it.text
		case it.node != nil:
			var s string
			s, errs[i] = it.node.String()
			out[i] = []byte(s)
		default:
			// Straight to YAML with the encoder of the one reader: it quotes strings that would
			// read back as anything else (hash labels such as 58130e46, 0o17, yes).
			out[i], errs[i] = manifest.EncodeObject(it.obj.Object)
		}
	})
	return out, errors.Join(errs...)
}

// writeIndented writes a YAML document as a block under a list or map key: the first line after
// first, the others indented by two spaces. Block scalars stay valid: their indentation is
// relative.
func writeIndented(w *bufio.Writer, first string, text []byte) {
	text = bytes.TrimRight(text, "\n")
	for i, line := range bytes.Split(text, []byte("\n")) {
		switch {
		case i == 0:
			w.WriteString(first)
		case len(line) > 0 && first != "":
			w.WriteString("  ")
		}
		w.Write(line)
		w.WriteByte('\n')
	}
}
