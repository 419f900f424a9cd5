package manifest

import (
	"math"
	"slices"
	"strconv"
	"unicode"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// appendYAML writes an object as block YAML, byte for byte what kyaml's encoder (go-yaml v3,
// indent 2, compact sequences) writes for it, without go-yaml's cost: its emitter queues every
// event of a document in a slice of 200-byte structs and sorts keys through reflection, which made
// encoding the costliest step of a large render after admission (2.9 s of CPU and 1.5 GB
// allocated for the 40,000 objects of the function's benchmark).
//
// It covers what rendered objects hold: mappings with string keys, lists, booleans, integers,
// floats, null, and strings of printable ASCII on one line. Anything else (a multi-line or
// non-ASCII string, whose block or escaped forms follow many more rules; a key over 128 bytes,
// which go-yaml writes as a complex key) makes it return false, and the caller encodes the object
// with go-yaml. FuzzRead checks the two agree on everything the reader accepts.
func appendYAML(buf []byte, obj map[string]any) ([]byte, bool) {
	if len(obj) == 0 {
		return append(buf, "{}\n"...), true
	}
	return appendMapping(buf, obj, 0, false)
}

// appendMapping writes a non-empty mapping whose keys start at column indent; inline means the
// first key goes on the current line (after a sequence's "- ").
func appendMapping(buf []byte, m map[string]any, indent int, inline bool) ([]byte, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for i, k := range keys {
		if i > 0 || !inline {
			buf = appendIndent(buf, indent)
		}
		var ok bool
		if buf, ok = appendScalarString(buf, k, true); !ok {
			return buf, false
		}
		buf = append(buf, ':')
		if buf, ok = appendValue(buf, m[k], indent, false); !ok {
			return buf, false
		}
	}
	return buf, true
}

// appendSequence writes a non-empty list whose dashes are at column indent; inline means the first
// dash goes on the current line.
func appendSequence(buf []byte, s []any, indent int, inline bool) ([]byte, bool) {
	for i, v := range s {
		if i > 0 || !inline {
			buf = appendIndent(buf, indent)
		}
		buf = append(buf, '-')
		var ok bool
		if buf, ok = appendValue(buf, v, indent, true); !ok {
			return buf, false
		}
	}
	return buf, true
}

// appendValue writes the value after a key's colon or a sequence's dash (at column indent) and the
// line end. Under a key a nested list keeps the key's indentation (compact sequences); under a
// dash nested collections start on the dash's line.
func appendValue(buf []byte, v any, indent int, inSequence bool) ([]byte, bool) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			return append(buf, " {}\n"...), true
		}
		if inSequence {
			return appendMapping(append(buf, ' '), t, indent+2, true)
		}
		return appendMapping(append(buf, '\n'), t, indent+2, false)
	case []any:
		if len(t) == 0 {
			return append(buf, " []\n"...), true
		}
		if inSequence {
			return appendSequence(append(buf, ' '), t, indent+2, true)
		}
		return appendSequence(append(buf, '\n'), t, indent, false)
	}
	buf = append(buf, ' ')
	var ok bool
	switch t := v.(type) {
	case nil:
		buf = append(buf, "null"...)
	case bool:
		buf = strconv.AppendBool(buf, t)
	case int64:
		buf = strconv.AppendInt(buf, t, 10)
	case int:
		buf = strconv.AppendInt(buf, int64(t), 10)
	case int32:
		buf = strconv.AppendInt(buf, int64(t), 10)
	case float64:
		switch {
		case math.IsInf(t, 1):
			buf = append(buf, ".inf"...)
		case math.IsInf(t, -1):
			buf = append(buf, "-.inf"...)
		case math.IsNaN(t):
			buf = append(buf, ".nan"...)
		default:
			buf = strconv.AppendFloat(buf, t, 'g', -1, 64)
		}
	case string:
		if buf, ok = appendScalarString(buf, t, false); !ok {
			return buf, false
		}
	default:
		return buf, false
	}
	return append(buf, '\n'), true
}

func appendIndent(buf []byte, n int) []byte {
	for range n {
		buf = append(buf, ' ')
	}
	return buf
}

// appendScalarString writes a string the way go-yaml v3 chooses for it: plain unless it would
// read back as another type (or as a YAML 1.1 boolean or sexagesimal number), then double-quoted;
// single-quoted when a plain scalar would be misread as YAML syntax.
func appendScalarString(buf []byte, s string, key bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return buf, false
		}
	}
	if key && len(s) > 128 {
		return buf, false
	}
	n := kyaml.Node{Kind: kyaml.ScalarNode, Value: s}
	if n.ShortTag() != kyaml.NodeTagString || isBase60Float(s) || isOldBool(s) {
		buf = append(buf, '"')
		for i := 0; i < len(s); i++ {
			if s[i] == '"' || s[i] == '\\' {
				buf = append(buf, '\\')
			}
			buf = append(buf, s[i])
		}
		return append(buf, '"'), true
	}
	if !plainAllowed(s) {
		buf = append(buf, '\'')
		for i := 0; i < len(s); i++ {
			if s[i] == '\'' {
				buf = append(buf, '\'')
			}
			buf = append(buf, s[i])
		}
		return append(buf, '\''), true
	}
	return append(buf, s...), true
}

// plainAllowed is go-yaml's test for a plain scalar in block context, for printable ASCII on one
// line: no leading or trailing space, no document marker, no indicator where YAML would read
// one.
func plainAllowed(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	if len(s) >= 3 && (s[:3] == "---" || s[:3] == "...") {
		return false
	}
	spaceAfter := func(i int) bool { return i+1 >= len(s) || s[i+1] == ' ' }
	switch s[0] {
	case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	case '?', ':', '-':
		if spaceAfter(0) {
			return false
		}
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case ':':
			if spaceAfter(i) {
				return false
			}
		case '#':
			if s[i-1] == ' ' {
				return false
			}
		}
	}
	return true
}

// isBase60Float and isOldBool are go-yaml's: strings YAML 1.1 would read as a sexagesimal number or
// a boolean are quoted, so YAML 1.1 readers read them back as strings.
func isBase60Float(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if !(c == '+' || c == '-' || c >= '0' && c <= '9') {
		return false
	}
	// ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
	i := 0
	if s[i] == '+' || s[i] == '-' {
		i++
	}
	if i >= len(s) || !isDigit(s[i]) {
		return false
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
		i++
	}
	groups := 0
	for i < len(s) && s[i] == ':' {
		i++
		switch {
		case i+1 < len(s) && s[i] >= '0' && s[i] <= '5' && isDigit(s[i+1]):
			i += 2
		case i < len(s) && isDigit(s[i]):
			i++
		default:
			return false
		}
		groups++
	}
	if groups == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// compareKeys orders mapping keys as go-yaml v3 does (its keyList.Less): where two keys first
// differ, two letters compare by code point; a letter and a non-letter put the letter first after
// a digit and last otherwise; otherwise the runs of digits starting there compare by numeric
// value, then by length, then by code point; a key that is a prefix of the other comes first. So
// "port2" sorts before "port10". Keys are distinct, so the order does not depend on the order the
// map yields them in.
func compareKeys(a, b string) int {
	var abuf, bbuf [64]rune
	ar, br := appendRunes(abuf[:0], a), appendRunes(bbuf[:0], b)
	switch {
	case runesLess(ar, br):
		return -1
	case runesLess(br, ar):
		return 1
	}
	return 0
}

func appendRunes(buf []rune, s string) []rune {
	for _, r := range s {
		buf = append(buf, r)
	}
	return buf
}

func runesLess(a, b []rune) bool {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) < len(b)
	}
	afterDigit := i > 0 && unicode.IsDigit(a[i-1])
	aLetter, bLetter := unicode.IsLetter(a[i]), unicode.IsLetter(b[i])
	switch {
	case aLetter && bLetter:
		return a[i] < b[i]
	case aLetter != bLetter:
		return aLetter == afterDigit
	}
	// A zero where the keys differ counts as a digit of the number before it when that number
	// has a non-zero digit (go-yaml starts both values at 1 then).
	var an, bn int64
	if a[i] == '0' || b[i] == '0' {
		for j := i - 1; j >= 0 && unicode.IsDigit(a[j]); j-- {
			if a[j] != '0' {
				an, bn = 1, 1
				break
			}
		}
	}
	aEnd, bEnd := i, i
	for ; aEnd < len(a) && unicode.IsDigit(a[aEnd]); aEnd++ {
		an = an*10 + int64(a[aEnd]-'0')
	}
	for ; bEnd < len(b) && unicode.IsDigit(b[bEnd]); bEnd++ {
		bn = bn*10 + int64(b[bEnd]-'0')
	}
	switch {
	case an != bn:
		return an < bn
	case aEnd != bEnd:
		return aEnd < bEnd
	}
	return a[i] < b[i]
}
