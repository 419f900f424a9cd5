package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
)

// File is a parsed YAML stream, kept as the text of each document so that documents migrate does
// not change are written back byte for byte.
type File struct {
	Name string
	docs []*document
}

// document is one document of a stream: the separator line that opened it ("" for the first),
// its text, and its parsed node (nil when it holds no object, say only comments).
type document struct {
	sep  string
	body string
	// line is the 1-based line of the file where body starts.
	line int
	node *kyaml.Node
}

// ParseError is a document that is not valid YAML, with the file and line.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

var (
	separator = regexp.MustCompile(`^---[ \t]*(#.*)?\r?\n?$`)
	yamlLine  = regexp.MustCompile(`^yaml: line (\d+): `)
)

// Parse splits data into documents at lines holding only "---" and parses each. A document that
// fails to parse is an error naming the file and the line in the file.
//
// The stream is first read as render reads it (manifest/yamlread: UTF-8 only, duplicate keys,
// alias bombs, numbers JSON cannot hold), with render's messages: migrate must not write a file
// render then refuses (with replicas: 0 and replicas: 1 it converted the first and kept the
// second), nor meet a duplicate key only when it reads its own edit back.
func Parse(name string, data []byte) (*File, error) {
	if err := readAsRender(data); err != nil {
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	f := &File{Name: name}
	lines := strings.SplitAfter(string(data), "\n")
	cur := &document{line: 1}
	var body strings.Builder
	flush := func() {
		cur.body = body.String()
		body.Reset()
		f.docs = append(f.docs, cur)
	}
	for i, l := range lines {
		if l == "" {
			continue
		}
		if separator.MatchString(l) {
			flush()
			cur = &document{sep: l, line: i + 2}
			continue
		}
		body.WriteString(l)
	}
	flush()
	for _, d := range f.docs {
		n, err := parseDoc(d.body)
		if err != nil {
			return nil, parseError(name, d.line, err)
		}
		d.node = n
	}
	return f, nil
}

// readAsRender reads data with render's reader and converts every document, so that whatever
// render refuses in the YAML itself is refused here, in the same words. Documents need not be
// Kubernetes objects: migrate leaves the others alone.
func readAsRender(data []byte) error {
	nodes, err := yamlread.ReadNodes(data)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := yamlread.NodeValue(n.Node); err != nil {
			return fmt.Errorf("document %d, %w", n.Index, err)
		}
	}
	return nil
}

// parseDoc parses one document's text; nil when it holds no node.
func parseDoc(text string) (*kyaml.Node, error) {
	dec := kyaml.NewDecoder(strings.NewReader(text))
	n := &kyaml.Node{}
	if err := dec.Decode(n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	if err := dec.Decode(&kyaml.Node{}); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one document where one was expected")
	}
	return n, nil
}

func parseError(name string, start int, err error) *ParseError {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		rel, _ := strconv.Atoi(m[1])
		return &ParseError{File: name, Line: start + rel - 1, Msg: strings.TrimPrefix(msg, m[0])}
	}
	return &ParseError{File: name, Line: start, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// object is the top-level mapping of a document, or nil.
func (d *document) object() *kyaml.Node {
	if d.node == nil || d.node.Kind != kyaml.DocumentNode || len(d.node.Content) != 1 {
		return nil
	}
	return d.node.Content[0]
}

// Pools calls add for every SandboxWarmPool of the file (either version) with the template it
// uses, so claims can be checked against the pools of every file of a migration.
func (f *File) Pools(add func(namespace, name, template string)) {
	for _, d := range f.docs {
		obj := d.object()
		_, av := get(obj, "apiVersion")
		_, kv := get(obj, "kind")
		if av != nil && kv != nil && av.Value == "v1" && strings.HasSuffix(kv.Value, "List") {
			if _, items := get(obj, "items"); items != nil && items.Kind == kyaml.SequenceNode {
				for _, it := range items.Content {
					pool(it, add)
				}
			}
			continue
		}
		pool(obj, add)
	}
}

// FilesOptions are the Options for converting files together: a claim is checked against the
// pools of every one of them, wherever they are.
func FilesOptions(files []*File) Options {
	pools := map[[2]string]string{}
	for _, f := range files {
		f.Pools(func(ns, name, tmpl string) { pools[[2]string{ns, name}] = tmpl })
	}
	return Options{PoolTemplate: func(ns, name string) (string, bool) {
		tmpl, ok := pools[[2]string{ns, name}]
		return tmpl, ok
	}}
}

// pool calls add if obj is a SandboxWarmPool.
func pool(obj *kyaml.Node, add func(namespace, name, template string)) {
	_, av := get(obj, "apiVersion")
	_, kv := get(obj, "kind")
	if av == nil || kv == nil || kv.Value != "SandboxWarmPool" || !strings.HasPrefix(av.Value, extensionsGroup+"/") {
		return
	}
	var ns, name, tmpl string
	_, md := get(obj, "metadata")
	if _, v := get(md, "name"); v != nil {
		name = v.Value
	}
	if _, v := get(md, "namespace"); v != nil {
		ns = v.Value
	}
	_, spec := get(obj, "spec")
	_, ref := get(spec, "sandboxTemplateRef")
	if _, v := get(ref, "name"); v != nil {
		tmpl = v.Value
	}
	add(ns, name, tmpl)
}

// FileResult is what migrating a file did: one result per object, with lines of the file.
type FileResult struct {
	Objects []*Result
	// Changed is true when the output differs from the input.
	Changed bool
}

// Failed reports whether any object could not be converted; the file must then not be written.
func (r *FileResult) Failed() bool {
	for _, o := range r.Objects {
		if o.Failed() {
			return true
		}
	}
	return false
}

// Migrate converts every v1alpha1 object of the file and returns the new text. Documents that
// hold no v1alpha1 object are copied as they were read; a converted document gets the minimal
// text edits equivalent to the node edits, checked by parsing the result and comparing it with
// the edited nodes, and is re-encoded from the nodes (comments kept) only when those edits cannot
// express the change. Finding lines are lines of the file.
func (f *File) Migrate(opts Options) ([]byte, *FileResult, error) {
	res := &FileResult{}
	var out bytes.Buffer
	for _, d := range f.docs {
		out.WriteString(d.sep)
		obj := d.object()
		if obj == nil {
			out.WriteString(d.body)
			continue
		}
		r := Object(kyaml.NewRNode(obj), opts)
		for i := range r.Findings {
			if r.Findings[i].Line > 0 {
				r.Findings[i].Line += d.line - 1
			}
		}
		if r.Kind != "" && (r.Changed || len(r.Findings) > 0) {
			res.Objects = append(res.Objects, r)
		}
		if !r.Changed {
			out.WriteString(d.body)
			continue
		}
		text, err := d.rewrite(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %s %s: %w", f.Name, d.line, r.Kind, r.Name, err)
		}
		out.WriteString(text)
	}
	b := out.Bytes()
	res.Changed = !bytes.Equal(b, f.bytes())
	return b, res, nil
}

func (f *File) bytes() []byte {
	var b bytes.Buffer
	for _, d := range f.docs {
		b.WriteString(d.sep)
		b.WriteString(d.body)
	}
	return b.Bytes()
}

// rewrite is the new text of a converted document.
func (d *document) rewrite(r *Result) (string, error) {
	if !r.reencode {
		if text, ok := applyEdits(d.body, r.edits); ok && sameData(text, d.node) {
			return text, nil
		}
	}
	style := kyaml.DeriveSeqIndentStyle(d.body)
	b, err := kyaml.MarshalWithOptions(d.node, &kyaml.EncoderOptions{SeqIndent: kyaml.SequenceIndentStyle(style)})
	if err != nil {
		return "", err
	}
	if !sameData(string(b), d.node) {
		return "", errors.New("the re-encoded document does not read back as the converted object; please report this")
	}
	return string(b), nil
}

// applyEdits applies text edits, each checked against the text it expects; ok is false when one
// does not match (the caller then re-encodes).
func applyEdits(body string, edits []textEdit) (string, bool) {
	lines := strings.SplitAfter(body, "\n")
	type lineEdit struct {
		del     bool
		insert  []string
		replace []textEdit
	}
	byLine := map[int]*lineEdit{}
	for _, e := range edits {
		if e.line < 1 || e.line > len(lines) {
			return "", false
		}
		le := byLine[e.line]
		if le == nil {
			le = &lineEdit{}
			byLine[e.line] = le
		}
		switch {
		case e.deleteLine:
			if strings.TrimSpace(string([]rune(lines[e.line-1])[:min(e.col-1, len([]rune(lines[e.line-1])))])) != "" {
				return "", false
			}
			le.del = true
		case e.insert != "":
			le.insert = append(le.insert, e.insert)
		default:
			le.replace = append(le.replace, e)
		}
	}
	var out strings.Builder
	for i, l := range lines {
		le := byLine[i+1]
		if le == nil {
			out.WriteString(l)
			continue
		}
		eol := "\n"
		if strings.HasSuffix(l, "\r\n") {
			eol = "\r\n"
		}
		for _, ins := range le.insert {
			out.WriteString(ins + eol)
		}
		if le.del {
			continue
		}
		// Right to left, so earlier columns stay valid.
		rs := []rune(l)
		sort.Slice(le.replace, func(a, b int) bool { return le.replace[a].col < le.replace[b].col })
		for j := len(le.replace) - 1; j >= 0; j-- {
			e := le.replace[j]
			at, old := e.col-1, []rune(e.old)
			if at < 0 || at+len(old) > len(rs) || string(rs[at:at+len(old)]) != e.old {
				return "", false
			}
			rs = append(append(append([]rune{}, rs[:at]...), []rune(e.new)...), rs[at+len(old):]...)
		}
		out.WriteString(string(rs))
	}
	return out.String(), true
}

// sameData reports whether text reads back as the same data as node.
func sameData(text string, node *kyaml.Node) bool {
	n, err := parseDoc(text)
	if err != nil || n == nil {
		return false
	}
	var got, want any
	if n.Decode(&got) != nil || node.Decode(&want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}

// Messages are the findings of a file for people, one line each: file and line, severity,
// object and field.
func (r *FileResult) Messages(file string) []string {
	var out []string
	for _, o := range r.Objects {
		obj := o.Kind
		switch {
		case o.Name != "" && o.Namespace != "":
			obj += " " + o.Namespace + "/" + o.Name
		case o.Name != "":
			obj += " " + o.Name
		}
		for _, f := range o.Findings {
			sev := "error"
			if f.Warning {
				sev = "warning"
			}
			loc := file
			if f.Line > 0 {
				loc = fmt.Sprintf("%s:%d", file, f.Line)
			}
			out = append(out, fmt.Sprintf("%s: %s: %s: %s", loc, sev, obj, f.Err.Error()))
		}
	}
	return out
}
