package kbuild

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
)

// placer places a build's findings as render places its own: the file as the person who ran the
// build named the tree, the document and the line. kustomize gives an object's file relative to
// the tree it builds (the origin annotation), with no document, and reads files by absolute path,
// symlinks resolved; render names a file as it was given. So a finding's file is the tree as given
// joined once with the path relative to it (w/template.yaml for the tree w, base/template.yaml for
// the file of a base ../base of the tree overlay), and its document is found in the file as the
// build read it.
type placer struct {
	// dir is the tree as given; roots are where kustomize reads it: dir made absolute, and with
	// its symlinks resolved. A remote tree has no roots: its paths are left as kustomize gives
	// them, relative to its repository.
	dir   string
	roots []string
	// read are the files the build read, by absolute path; docs those read as objects, and
	// nodes the documents read again to find a field's line.
	read  map[string][]byte
	docs  map[string]fileDocs
	nodes map[docKey]*yamlread.Node
}

// fileDocs are the documents of a file read as objects, and which of them have each kind and
// name: a search of the file per finding made n findings in one file cost n² (issue 37).
type fileDocs struct {
	docs   []yamlread.Document
	byName map[kindName][]int
}

type kindName struct{ kind, name string }

func newFileDocs(docs []yamlread.Document) fileDocs {
	f := fileDocs{docs: docs, byName: make(map[kindName][]int, len(docs))}
	for i, d := range docs {
		k := kindName{d.Object.GetKind(), d.Object.GetName()}
		f.byName[k] = append(f.byName[k], i)
	}
	return f
}

// docKey is a document of a file the build read: its absolute path and 1-based index.
type docKey struct {
	file  string
	index int
}

func newPlacer(dir string, read []source) *placer {
	p := &placer{dir: dir, read: make(map[string][]byte, len(read)), docs: map[string]fileDocs{}, nodes: map[docKey]*yamlread.Node{}}
	for _, s := range read {
		p.read[s.path] = s.data
	}
	if remote(dir) {
		return p
	}
	a := abs(dir)
	p.roots = []string{a}
	if r, err := filepath.EvalSymlinks(a); err == nil && r != a {
		p.roots = append(p.roots, r)
	}
	return p
}

// name is a path of the build as the person named the tree: a path relative to the tree (an
// origin) or an absolute one (a file kustomize read) made relative to it, joined to the tree as
// given.
func (p *placer) name(path string) string {
	if len(p.roots) == 0 {
		return path
	}
	if !filepath.IsAbs(path) {
		return filepath.Join(p.dir, path)
	}
	// The shortest relative name wins: a tree reached through a symlink is read at its target.
	best := ""
	for _, root := range p.roots {
		if rel, err := filepath.Rel(root, path); err == nil && (best == "" || len(rel) < len(best)) {
			best = rel
		}
	}
	if best == "" {
		return path
	}
	return filepath.Join(p.dir, best)
}

// locate is the 1-based document and the line of a finding on the object ref names in a file of
// the build, path relative to the tree: the one document of its kind and name, or of its kind,
// name and namespace when several have the name (kustomize's namespace: replaces the file's). The
// line is the field's (yamlread.FieldLine), as render places it, or the document's first when the
// file does not write the field (a patch or a default set it). 0 when the build did not read the
// file or it holds no single such object (a patch may rename one).
func (p *placer) locate(path string, ref *kyaml.ResourceIdentifier, field string) (document, line int) {
	if ref == nil || len(p.roots) == 0 || filepath.IsAbs(path) {
		return 0, 0
	}
	var f fileDocs
	var file string
	for _, root := range p.roots {
		file = filepath.Join(root, path)
		if d, ok := p.docs[file]; ok {
			f = d
			break
		}
		if data, ok := p.read[file]; ok {
			docs, _ := yamlread.Read(file, data) // read once already, as render reads it
			f = newFileDocs(docs)
			p.docs[file] = f
			break
		}
	}
	var named, same []yamlread.Document
	for _, i := range f.byName[kindName{ref.Kind, ref.Name}] {
		d := f.docs[i]
		named = append(named, d)
		if d.Object.GetNamespace() == ref.Namespace {
			same = append(same, d)
		}
	}
	var d yamlread.Document
	switch {
	case len(named) == 1:
		d = named[0]
	case len(same) == 1:
		d = same[0]
	default:
		return 0, 0
	}
	return d.Index, p.fieldLine(docKey{file, d.Index}, d, field)
}

// fieldLine is the line of field in a document of a file the build read (see locate); each
// document is read again once, and only when a finding is on it.
func (p *placer) fieldLine(key docKey, d yamlread.Document, field string) int {
	n, seen := p.nodes[key]
	if !seen {
		if docs, err := yamlread.ReadNodes(d.Text); d.Text != nil && err == nil && len(docs) == 1 {
			n = &docs[0]
		}
		p.nodes[key] = n
	}
	if n != nil {
		if l := yamlread.FieldLine(n.Node, field); l > 0 {
			return l - n.Line + d.Line
		}
	}
	return d.Line
}

// place returns copies of results with their files named (see name) and, where the render knew
// the file but not the document, placed in it (see locate). Results of one object share their
// File and Tags, so they are copied, never changed in place: changing them in place joined the
// tree to the path once per finding (w/w/template.yaml).
func (p *placer) place(results framework.Results) framework.Results {
	out := make(framework.Results, len(results))
	for i, r := range results {
		c := *r
		if r.File != nil && r.File.Path != "" {
			c.File = &framework.File{Path: p.name(r.File.Path), Index: r.File.Index}
			if r.Tags[krm.TagDocument] == "" {
				if doc, line := p.locate(r.File.Path, r.ResourceRef, fieldPath(r)); doc > 0 {
					c.File.Index = doc - 1
					c.Tags = maps.Clone(r.Tags)
					if c.Tags == nil {
						c.Tags = map[string]string{}
					}
					maps.Copy(c.Tags, krm.FileTags(doc, line))
				}
			}
		}
		out[i] = &c
	}
	return out
}

// fieldPath is the field a result is about, "" for none.
func fieldPath(r *framework.Result) string {
	if r.Field == nil {
		return ""
	}
	return r.Field.Path
}

// unreadable is the report of files render would refuse to read: one line per file, led by its
// name, as render reports YAML it cannot read.
func (p *placer) unreadable(bad []badFile) *FindingsError {
	var b strings.Builder
	for _, u := range bad {
		b.WriteString(p.name(u.path) + ": " + u.err.Error() + "\n")
	}
	return &FindingsError{Report: b.String(), Count: len(bad)}
}

// findings is the report of results: one line per result, as render writes its findings.
func (p *placer) findings(results framework.Results) *FindingsError {
	placed := p.place(results)
	return &FindingsError{Report: krm.Format(placed), Count: len(placed)}
}

// ResultsDirFlag is the flag of sandbox-render fn that names a directory to write the function's
// results into, on a failure, instead of printing them, and its warnings when it succeeds. A
// build that runs the function as kustomize runs it (as a process) passes it: kustomize lets the
// function's standard error through to its own and drops the results, so the build could neither
// name the files as the tree was given nor place the findings in their documents, as it does when
// it renders in process, nor show the warnings of a render that succeeded.
const ResultsDirFlag = "results-dir"

// WriteResults writes a function's results into dir (see ResultsDirFlag), in a file of their own.
func WriteResults(dir string, results framework.Results) error {
	b, err := yaml.Marshal(results)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "results-*.yaml")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readResults reads the results WriteResults wrote into dir, in the files' name order, and
// removes the files, so that a second build into the same directory does not read them again.
// kustomize stops at the first function that fails, so there is one file of errors at most;
// functions that succeeded before it may have written their warnings.
func readResults(dir string) (framework.Results, error) {
	if dir == "" {
		return nil, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "results-*.yaml"))
	if err != nil {
		return nil, err
	}
	var out framework.Results
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var rs framework.Results
		if err := yaml.Unmarshal(b, &rs); err != nil {
			return nil, fmt.Errorf("reading the render's results: %w", err)
		}
		out = append(out, rs...)
		if err := os.Remove(file); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withSeverity are the results of that severity, or (not) of any other.
func withSeverity(results framework.Results, s framework.Severity, not bool) framework.Results {
	var out framework.Results
	for _, r := range results {
		if (r.Severity == s) != not {
			out = append(out, r)
		}
	}
	return out
}

// warnings are the warning results of a build that succeeded, placed as findings are and sorted
// as Format writes them but for their lines: several functions may have written them, in any
// order. Without the lines, the warnings of one object keep the order of their fields, as render
// writes them, wherever their fields are in its document.
func (p *placer) warnings(results framework.Results) framework.Results {
	placed := p.place(withSeverity(results, framework.Warning, false))
	key := func(r *framework.Result) string {
		c := *r
		c.Tags = maps.Clone(r.Tags)
		delete(c.Tags, krm.TagLine)
		return krm.Format(framework.Results{&c})
	}
	slices.SortStableFunc(placed, func(a, b *framework.Result) int { return strings.Compare(key(a), key(b)) })
	return placed
}
