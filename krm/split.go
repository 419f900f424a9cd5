package krm

import (
	"bytes"
	"errors"
	"io"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
)

// readSplit reads a ResourceList laid out as kustomize and kyaml write one (a block "items:" at
// the top level, each item a block mapping after a "- " at column 0) item by item, on every core:
// each item's text is parsed on its own, read into an object and let go, so the list is never
// parsed into one tree (which on 40,000 objects takes 130 MB and a second of one core before
// anything else can start). The rest of the list (functionConfig, the keys) is parsed as the
// document with the items' lines blanked out, so every line keeps its number.
//
// Items parsed alone are the same nodes as in the whole document, shifted by their line and
// indentation: YAML's block structure is relative to its indentation. Where the text could read
// otherwise, parsing an item on its own fails (a quoted or flow value running over an item's
// end, an anchor defined in another item, a directive or document marker) or yields something
// that is not a block mapping, and readSplit returns false, as it does for anything malformed
// or laid out differently: the caller then parses the whole document, whose reading is the
// reference.
func readSplit(data []byte) (*framework.ResourceList, []source, [][]byte, bool) {
	if yamlread.CheckEncoding(data) != nil {
		return nil, nil, nil, false // the whole reading reports it, with the document and line
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	itemsAt, starts, end, ok := itemLayout(lines)
	if !ok {
		return nil, nil, nil, false
	}
	rl, ok := readFrame(lines, len(data), itemsAt, end)
	if !ok {
		return nil, nil, nil, false
	}
	srcs, pos, ok := readItemsSplit(lines, starts, end)
	if !ok {
		return nil, nil, nil, false
	}
	texts := sourceTexts(data, pos, end)
	for _, t := range texts {
		if t == nil {
			return nil, nil, nil, false
		}
	}
	return rl, srcs, texts, true
}

// itemLayout finds the lines of the list's items: the 0-based line of "items:", each item's first
// line (a "- " at column 0) and the line after the last item (the next top-level key, or the
// end); false for any other layout.
func itemLayout(lines [][]byte) (itemsAt int, starts []int, end int, ok bool) {
	itemsAt = -1
	for i, l := range lines {
		switch {
		case len(l) > 0 && l[0] == '%', yamlread.IsDocumentMarker(l):
			return 0, nil, 0, false
		case string(bytes.TrimRight(l, " \r\n")) == "items:":
			if itemsAt >= 0 {
				return 0, nil, 0, false
			}
			itemsAt = i
		}
	}
	if itemsAt < 0 {
		return 0, nil, 0, false
	}
	// The items run from the first "- " line after "items:" to the next top-level key.
	end = len(lines)
	for i := itemsAt + 1; i < len(lines); i++ {
		l := lines[i]
		switch {
		case blank(l):
		case l[0] == '-' && (len(l) == 1 || l[1] == ' ' || l[1] == '\n'):
			starts = append(starts, i)
		case len(starts) > 0 && bytes.HasPrefix(l, []byte("  ")):
		case l[0] != ' ' && l[0] != '\t' && l[0] != '#':
			end = i
		default:
			return 0, nil, 0, false
		}
		if end < len(lines) {
			break
		}
	}
	return itemsAt, starts, end, len(starts) > 0
}

// readFrame parses the rest of the document (of size bytes), the items' lines blanked out so
// that every line keeps its number, and checks it as the whole reading would: one ResourceList,
// its items key where itemLayout found it, nothing else wrong with it.
func readFrame(lines [][]byte, size, itemsAt, end int) (*framework.ResourceList, bool) {
	var frame bytes.Buffer
	frame.Grow(size / 8)
	for i, l := range lines {
		if i > itemsAt && i < end {
			frame.WriteByte('\n')
			continue
		}
		frame.Write(l)
	}
	var doc kyaml.Node
	if err := kyaml.NewDecoder(&frame).Decode(&doc); err != nil || len(doc.Content) != 1 {
		return nil, false
	}
	root := doc.Content[0]
	if root.Kind != kyaml.MappingNode {
		return nil, false
	}
	if items := itemsKey(root); items == nil || items.Line != itemsAt+1 {
		return nil, false
	}
	rl, _, bad := checkRoot(root)
	if bad != nil || len(rl.Items) > 0 {
		return nil, false
	}
	return rl, true

}

// readItemsSplit parses each item on its own, on every core, into its source and its place in the
// text; false if any item reads differently alone (see readSplit).
func readItemsSplit(lines [][]byte, starts []int, end int) ([]source, []itemPos, bool) {
	srcs := make([]source, len(starts))
	pos := make([]itemPos, len(starts))
	ok := make([]bool, len(starts))
	parallel.Each(len(starts), func(k int) {
		last := end
		if k+1 < len(starts) {
			last = starts[k+1]
		}
		n := parseItem(lines[starts[k]:last], starts[k])
		if n == nil {
			return
		}
		srcs[k], pos[k], ok[k] = readSource(n), posOf(n), true
	})
	for _, good := range ok {
		if !good {
			return nil, nil, false
		}
	}
	return srcs, pos, true
}

// parseItem parses one item's lines (the first starting with "- ", the others indented by two
// spaces or blank) as the block mapping they hold, with lines and columns as in the whole
// document (first is the 0-based line of the first); nil if they hold anything else.
func parseItem(lines [][]byte, first int) *kyaml.Node {
	var text bytes.Buffer
	for i, l := range lines {
		switch {
		case i == 0:
			l = bytes.TrimPrefix(l[1:], []byte(" "))
		case blank(l):
			l = dedentBlank(l, 2)
		default:
			l = l[2:]
		}
		if len(l) > 0 && l[0] == '%' || yamlread.IsDocumentMarker(l) {
			return nil
		}
		text.Write(l)
	}
	dec := kyaml.NewDecoder(&text)
	var doc kyaml.Node
	if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 {
		return nil
	}
	if err := dec.Decode(new(kyaml.Node)); !errors.Is(err, io.EOF) {
		return nil
	}
	n := doc.Content[0]
	if n.Kind != kyaml.MappingNode || n.Style&kyaml.FlowStyle != 0 {
		return nil
	}
	yamlread.Shift(n, first, 2)
	return n
}

// itemsKey is the key node "items" of a mapping, or nil.
func itemsKey(n *kyaml.Node) *kyaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == kyaml.ScalarNode && k.Value == "items" && isNullNode(n.Content[i+1]) {
			return k
		}
	}
	return nil
}

func blank(l []byte) bool { return len(bytes.TrimRight(l, " \r\n")) == 0 }

// dedentBlank drops at most indent leading spaces from a line holding only spaces (and its line
// end). Spaces past the item's indentation are content inside a literal block scalar ("|"), so
// a line of them is kept as the whole reading keeps it, not turned into an empty line.
func dedentBlank(l []byte, indent int) []byte {
	n := 0
	for n < indent && n < len(l) && l[n] == ' ' {
		n++
	}
	return l[n:]
}
