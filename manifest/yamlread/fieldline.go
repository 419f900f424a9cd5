package yamlread

import (
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// FieldLine is the line of the field a path names in an object's node, so that a finding names
// the line a person fixes and not the first line of the document. The path is written as
// k8s.io/apimachinery's field.Path writes it: spec.containers[0].name, and a map key in
// brackets, metadata.labels[app.kubernetes.io/name]. The line is that of the field's key, or of
// its item in a list. A field the node does not hold (a required value that is missing, a field a
// default would set) is placed at the nearest field above it that the node holds: the item or the
// object that lacks it. 0 when the node holds not even the path's first field, or the path is
// empty.
//
// A key holding dots (an annotation such as config.kubernetes.io/path) may be written without
// brackets, as the schema validation writes unknown fields: at each mapping the longest key the
// path goes on with is taken.
func FieldLine(n *kyaml.Node, path string) int {
	line := 0
	for n != nil && path != "" {
		for n.Kind == kyaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *kyaml.Node
		var at int
		next, at, path = step(n, path)
		if next == nil {
			break
		}
		line, n = at, next
	}
	return line
}

// step follows the first segment of path from n: the node it names, the line to report for it,
// and the rest of the path. nil when n holds no such field.
func step(n *kyaml.Node, path string) (*kyaml.Node, int, string) {
	bracket := strings.HasPrefix(path, "[")
	switch {
	case bracket && n.Kind == kyaml.SequenceNode:
		end := strings.IndexByte(path, ']')
		if end < 0 {
			return nil, 0, ""
		}
		i, err := strconv.Atoi(path[1:end])
		if err != nil || i < 0 || i >= len(n.Content) {
			return nil, 0, ""
		}
		item := n.Content[i]
		return item, item.Line, rest(path[end+1:])
	case n.Kind == kyaml.MappingNode:
		p := path
		if bracket {
			p = path[1:]
		}
		best := -1
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != kyaml.ScalarNode || !strings.HasPrefix(p, k.Value) || (best >= 0 && len(k.Value) <= len(n.Content[best].Value)) {
				continue
			}
			after := p[len(k.Value):]
			switch {
			case bracket && strings.HasPrefix(after, "]"),
				!bracket && (after == "" || after[0] == '.' || after[0] == '['):
				best = i
			}
		}
		if best < 0 {
			return nil, 0, ""
		}
		after := p[len(n.Content[best].Value):]
		if bracket {
			after = after[1:]
		}
		return n.Content[best+1], n.Content[best].Line, rest(after)
	}
	return nil, 0, ""
}

// rest is what follows a segment: the next one, without the dot that separates it.
func rest(path string) string {
	return strings.TrimPrefix(path, ".")
}
