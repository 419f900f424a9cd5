package krm

import (
	"bufio"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	goyaml "go.yaml.in/yaml/v2"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
)

// writeResults writes the results as the list under results:, a batch at a time on every core,
// each result as resultYAML. One sigs.k8s.io/yaml.Marshal of the whole list queued every event of
// the document and, with its round trip through JSON, cost more than the render: 40,000 findings
// (issue 37) took the function to twice the render's time and 830 MB.
func writeResults(w *bufio.Writer, results framework.Results) error {
	for start := 0; start < len(results); start += writeBatch {
		batch := results[start:min(start+writeBatch, len(results))]
		encoded := make([][]byte, len(batch))
		errs := make([]error, len(batch))
		parallel.Each(len(batch), func(i int) {
			encoded[i], errs[i] = resultYAML(batch[i])
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for _, b := range encoded {
			w.Write(b)
		}
	}
	return nil
}

// resultYAML is a result as an item of the results list, byte for byte what
// sigs.k8s.io/yaml.Marshal writes for that item: a list of one encodes as the whole list's text
// for it (go-yaml v2 folds a long message at the same columns either way). appendResult writes
// what findings hold; where resultValue knows the value sigs.k8s.io/yaml's JSON round trip would
// give, go-yaml v2 encodes it directly; otherwise the round trip runs.
func resultYAML(r *framework.Result) ([]byte, error) {
	if b, ok := appendResult(nil, r); ok {
		return b, nil
	}
	if v, ok := resultValue(r); ok {
		return goyaml.Marshal([]any{v})
	}
	return yaml.Marshal(framework.Results{r})
}

// resultValue is the value sigs.k8s.io/yaml hands go-yaml v2 for a result after its JSON round
// trip: the fields the json tags keep (omitempty: empty strings, a zero index, no tags are left
// out; a pointer that is set stays, even when all its fields are empty), with go-yaml sorting the
// keys. It declines (false) a value the round trip could change: a current or proposed value
// other than a string (numbers come back typed by go-yaml, structs as maps), or a string that is
// not UTF-8 (JSON replaces its bytes, go-yaml v2 would write it as !!binary).
func resultValue(r *framework.Result) (map[string]any, bool) {
	m := map[string]any{}
	ok := true
	str := func(into map[string]any, key, s string) {
		if s != "" {
			into[key] = s
			ok = ok && utf8.ValidString(s)
		}
	}
	str(m, "message", r.Message)
	str(m, "severity", string(r.Severity))
	if ref := r.ResourceRef; ref != nil {
		rm := map[string]any{}
		str(rm, "apiVersion", ref.APIVersion)
		str(rm, "kind", ref.Kind)
		str(rm, "name", ref.Name)
		str(rm, "namespace", ref.Namespace)
		m["resourceRef"] = rm
	}
	if f := r.Field; f != nil {
		fm := map[string]any{}
		str(fm, "path", f.Path)
		for key, v := range map[string]any{"currentValue": f.CurrentValue, "proposedValue": f.ProposedValue} {
			switch s := v.(type) {
			case nil:
			case string:
				fm[key] = s // kept when empty: omitempty leaves out a nil interface only
				ok = ok && utf8.ValidString(s)
			default:
				ok = false
			}
		}
		m["field"] = fm
	}
	if f := r.File; f != nil {
		fm := map[string]any{}
		str(fm, "path", f.Path)
		if f.Index != 0 {
			fm["index"] = f.Index
		}
		m["file"] = fm
	}
	if len(r.Tags) > 0 {
		tm := map[string]any{}
		for k, v := range r.Tags {
			tm[k] = v
			ok = ok && utf8.ValidString(k) && utf8.ValidString(v)
		}
		m["tags"] = tm
	}
	return m, ok
}

// v2Width is the column after which go-yaml v2 folds a scalar at its next space (its
// best_width; sigs.k8s.io/yaml leaves the default).
const v2Width = 80

// v2Entry is one key of a result's mapping as go-yaml v2 writes it: a scalar (str, or an integer
// when isInt), or a nested mapping (isMap, sub).
type v2Entry struct {
	key   string
	str   string
	isInt bool
	isMap bool
	sub   []v2Entry
}

// appendResult appends a result as an item of the results list, byte for byte what go-yaml v2
// writes for the value resultValue makes of it, without go-yaml's emitter: its analysis of every
// scalar and the buffers each Marshal allocates were most of the function's extra cost over
// render on 40,000 findings. It covers what findings hold: strings of printable ASCII that go-yaml
// writes plain, single-quoted or double-quoted (folded past column 80 as it folds them), the
// known keys and tags, no empty mapping; for anything else it returns false and go-yaml runs.
func appendResult(buf []byte, r *framework.Result) ([]byte, bool) {
	top, ok := resultEntries(r)
	if !ok || len(top) == 0 {
		return buf, false
	}
	return emitEntries(buf, top)
}

// resultEntries are r's keys and values in go-yaml's order (sorted; each of these sorts the same
// by bytes); false when r holds what appendResult does not write (a value that is not a string,
// a tag of someone else's).
func resultEntries(r *framework.Result) ([]v2Entry, bool) {
	var top []v2Entry
	if f := r.Field; f != nil {
		var sub []v2Entry
		for _, kv := range []struct {
			key string
			v   any
			set bool
		}{{"currentValue", f.CurrentValue, f.CurrentValue != nil}, {"path", f.Path, f.Path != ""}, {"proposedValue", f.ProposedValue, f.ProposedValue != nil}} {
			if !kv.set {
				continue
			}
			s, isString := kv.v.(string)
			if !isString {
				return nil, false
			}
			sub = append(sub, v2Entry{key: kv.key, str: s})
		}
		top = append(top, v2Entry{key: "field", isMap: true, sub: sub})
	}
	if f := r.File; f != nil {
		var sub []v2Entry
		if f.Index != 0 {
			sub = append(sub, v2Entry{key: "index", str: strconv.Itoa(f.Index), isInt: true})
		}
		if f.Path != "" {
			sub = append(sub, v2Entry{key: "path", str: f.Path})
		}
		top = append(top, v2Entry{key: "file", isMap: true, sub: sub})
	}
	if r.Message != "" {
		top = append(top, v2Entry{key: "message", str: r.Message})
	}
	if ref := r.ResourceRef; ref != nil {
		var sub []v2Entry
		for _, kv := range [][2]string{{"apiVersion", ref.APIVersion}, {"kind", ref.Kind}, {"name", ref.Name}, {"namespace", ref.Namespace}} {
			if kv[1] != "" {
				sub = append(sub, v2Entry{key: kv[0], str: kv[1]})
			}
		}
		top = append(top, v2Entry{key: "resourceRef", isMap: true, sub: sub})
	}
	if r.Severity != "" {
		top = append(top, v2Entry{key: "severity", str: string(r.Severity)})
	}
	if len(r.Tags) > 0 {
		var sub []v2Entry
		for _, k := range []string{TagDocument, TagLine} {
			if v, ok := r.Tags[k]; ok {
				sub = append(sub, v2Entry{key: k, str: v})
			}
		}
		if len(sub) != len(r.Tags) {
			return nil, false // a tag of someone else's: its key is not known to sort or write plain
		}
		top = append(top, v2Entry{key: "tags", isMap: true, sub: sub})
	}
	return top, true
}

// emitEntries appends top as one item of a block list, as go-yaml v2 writes it; false (and buf
// as it was) when go-yaml would write something this emitter does not.
func emitEntries(buf []byte, top []v2Entry) ([]byte, bool) {
	size := 64
	for _, t := range top {
		size += len(t.key) + len(t.str) + 16
		for _, s := range t.sub {
			size += len(s.key) + len(s.str) + 16
		}
	}
	e := v2Emitter{buf: slices.Grow(buf, size+size/8)} // an eighth for folds and quotes
	for i, t := range top {
		if i == 0 {
			e.buf = append(e.buf, "- "...)
			e.column = 2
		} else {
			e.newline(2)
		}
		e.write(t.key)
		e.write(":")
		if !t.isMap {
			if !e.scalar(t, 4) {
				return buf, false
			}
			continue
		}
		if len(t.sub) == 0 {
			return buf, false // go-yaml writes an empty mapping as {}
		}
		for _, s := range t.sub {
			e.newline(4)
			e.write(s.key)
			e.write(":")
			if !e.scalar(s, 6) {
				return buf, false
			}
		}
	}
	return append(e.buf, '\n'), true
}

// v2Emitter writes block YAML as go-yaml v2's emitter does, keeping its column to fold at.
type v2Emitter struct {
	buf    []byte
	column int
}

func (e *v2Emitter) write(s string) {
	e.buf = append(e.buf, s...)
	e.column += len(s)
}

func (e *v2Emitter) newline(indent int) {
	e.buf = append(e.buf, '\n')
	for range indent {
		e.buf = append(e.buf, ' ')
	}
	e.column = indent
}

// scalar writes a value after its key's colon; a folded line continues at indent. It returns
// false for a string that is not all printable ASCII, or that go-yaml might read as something
// other than a string for a reason v2Plain does not decide.
func (e *v2Emitter) scalar(v v2Entry, indent int) bool {
	s := v.str
	if v.isInt {
		e.write(" ")
		e.write(s)
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	plain, known := v2Plain(s)
	if !known {
		return false
	}
	if !plain {
		e.doubleQuoted(s, indent)
		return true
	}
	if v2BlockPlainAllowed(s) {
		e.fold(s, indent, "", "", func(i int) bool { return s[i+1] != ' ' })
		return true
	}
	e.fold(s, indent, "'", "'", func(i int) bool { return i > 0 && i < len(s)-1 && s[i+1] != ' ' })
	return true
}

// fold writes s between open and close as go-yaml v2's plain and single-quoted writers do: a
// space that starts a run of spaces, past column 80 and where canBreak allows, becomes a line
// break and indent; a single quote is doubled inside single quotes.
func (e *v2Emitter) fold(s string, indent int, open, close string, canBreak func(i int) bool) {
	e.write(" ")
	e.write(open)
	spaces := false
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if !spaces && e.column > v2Width && canBreak(i) {
				e.newline(indent)
			} else {
				e.write(" ")
			}
			spaces = true
			continue
		}
		if s[i] == '\'' && open == "'" {
			e.write("'")
		}
		e.buf = append(e.buf, s[i])
		e.column++
		spaces = false
	}
	e.write(close)
}

// doubleQuoted is go-yaml v2's double-quoted writer on printable ASCII: a quote and a backslash
// are escaped, and a space past column 80 (not the first or last character) becomes a line break,
// with a backslash before a space that follows it.
func (e *v2Emitter) doubleQuoted(s string, indent int) {
	e.write(` "`)
	spaces := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"' || s[i] == '\\':
			e.write(`\` + s[i:i+1])
			spaces = false
		case s[i] == ' ':
			if !spaces && e.column > v2Width && i > 0 && i < len(s)-1 {
				e.newline(indent)
				if s[i+1] == ' ' {
					e.write(`\`)
				}
			} else {
				e.write(" ")
			}
			spaces = true
		default:
			e.buf = append(e.buf, s[i])
			e.column++
			spaces = false
		}
	}
	e.write(`"`)
}

// v2Plain tells whether go-yaml v2 writes a printable-ASCII string unquoted when it can (it reads
// back as a string), and whether that is known here: a string starting with a sign, a digit or a
// dot may read as a number or a timestamp by rules not repeated here, except digits alone (an
// integer, or a float past int64: quoted either way).
func v2Plain(s string) (plain, known bool) {
	if s == "" {
		return false, true // null
	}
	switch c := s[0]; {
	case c >= '0' && c <= '9':
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false, false
			}
		}
		return false, true
	case c == '+' || c == '-' || c == '.':
		return false, false
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		return !slices.Contains(v2Words, s), true
	}
	return true, true
}

// v2Words are the plain scalars starting with a letter or ~ that go-yaml v2 reads as a boolean
// (YAML 1.1) or null. It never looks up "<<" (its merge key): '<' is not among the first
// characters it resolves, so it writes "<<" plain.
var v2Words = []string{"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
	"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "~", "null", "Null", "NULL"}

// v2BlockPlainAllowed is go-yaml v2's analysis of a printable-ASCII string for the plain style in
// block context: no leading or trailing space, no document marker, no indicator where it would
// read as one. Otherwise it is single-quoted.
func v2BlockPlainAllowed(s string) bool {
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	if len(s) >= 3 && (s[:3] == "---" || s[:3] == "...") {
		return false
	}
	followedBySpace := func(i int) bool { return i+1 >= len(s) || s[i+1] == ' ' }
	switch s[0] {
	case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	case '?', ':', '-':
		if followedBySpace(0) {
			return false
		}
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == ':' && followedBySpace(i):
			return false
		case s[i] == '#' && s[i-1] == ' ':
			return false
		}
	}
	return true
}
