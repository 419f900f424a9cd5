package krm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/migrate"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// originAnnotation is where kustomize records the file an object came from when the
// kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// Processor is the function as a kyaml framework.ResourceListProcessor.
var Processor = framework.ResourceListProcessorFunc(Process)

// Process runs the function on a ResourceList, as a kyaml framework.ResourceListProcessor. Items
// it does not own are passed through as the very nodes it was given. Problems become results
// (severity, resource, field, file); if any is an error, Process returns the results as its error
// (a non-zero exit) with the items still set: the input items unchanged, nothing half-rendered.
func Process(rl *framework.ResourceList) error {
	out, err := processNodes(rl)
	if err != nil {
		return err
	}
	items := make([]*kyaml.RNode, len(out))
	for i, o := range out {
		if o.Node != nil {
			items[i] = o.Node
			continue
		}
		if items[i], err = kyaml.FromMap(o.Object.Object); err != nil {
			return fmt.Errorf("encoding %s %s: %w", o.Object.GetKind(), o.Object.GetName(), err)
		}
	}
	rl.Items = items
	if rl.Results.ExitCode() != 0 {
		return rl.Results
	}
	return nil
}

// processNodes runs the function on a list held as kyaml nodes (Process, Transform): items passed
// through come back as their nodes.
func processNodes(rl *framework.ResourceList) ([]Output, error) {
	srcs := make([]source, len(rl.Items))
	parallel.Each(len(srcs), func(i int) { srcs[i] = readSource(rl.Items[i].YNode()) })
	res, err := process(rl.FunctionConfig, srcs, &rl.Results, false)
	if err != nil {
		return nil, err
	}
	out := make([]Output, len(res))
	for i, it := range res {
		switch {
		case it.src >= 0:
			out[i].Node = rl.Items[it.src]
		case it.node != nil:
			out[i].Node = it.node
		default:
			out[i].Object = it.obj
		}
	}
	return out, nil
}

// source is one input item as the function holds it: the object it reads as (or why it is not
// one) and the file it came from. Its YAML is kept by the caller, which alone writes it.
type source struct {
	obj  *unstructured.Unstructured
	err  error
	file *framework.File
}

// readSource reads an item with the one reader (manifest.NodeObject): YAML 1.2, duplicate keys an
// error, linear in the item's size. kyaml's RNode.Map goes through yaml.v3's decoder, whose
// duplicate-key check is quadratic (53 s for a ConfigMap with 100,000 keys).
func readSource(n *kyaml.Node) source {
	obj, err := manifest.NodeObject(n)
	return source{obj: obj, err: err, file: fileOf(n)}
}

// item is one output item: an input passed through (src, its index), an item of the
// functionConfig's spec.resources passed through (node), or an object the render made (obj, or
// text when it came encoded).
type item struct {
	src  int
	node *kyaml.RNode
	obj  *unstructured.Unstructured
	text []byte
}

// unchanged is the output when the input is returned as it came: every listed item.
func unchanged(n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{src: i}
	}
	return out
}

// process computes the output items from the function's config and the listed items, and appends
// to results. On findings the output is the input, unchanged. With encode, rendered objects come
// as their YAML (bundle.ExpandEntries).
func process(fc *kyaml.RNode, listed []source, results *framework.Results, encode bool) ([]item, error) {
	in, bad, err := readInput(fc, listed)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		*results = append(*results, bad...)
		return unchanged(len(listed)), nil
	}
	x, converted, err := in.expand(encode)
	if err != nil {
		return in.refuse(results, err)
	}
	*results = append(*results, in.warnings(x.Warnings)...)
	if in.cfg.Spec.Mode == renderconfig.ModeValidate {
		*results = append(*results, &framework.Result{Severity: framework.Info,
			Message: fmt.Sprintf("%d objects checked; the agent-sandbox ones render without error", len(in.objs))})
		return unchanged(len(listed)), nil
	}
	copies, replaced, err := configCopies(in.cfg, fc != nil, in.objs)
	if err != nil {
		return in.refuse(results, err)
	}
	return in.items(x.Entries, converted, copies, replaced), nil
}

// input is what one run of the function works on: its config, and every item (the listed ones,
// then the functionConfig's spec.resources) as its source and as its object.
type input struct {
	cfg *renderconfig.Config
	// opts are cfg's render options, computed once for the expansion and its warnings alike.
	opts      render.Options
	listed    int            // how many of srcs are listed items
	srcs      []source       // the listed items, then spec.resources
	generated []*kyaml.RNode // spec.resources as nodes, to be written as they are
	objs      []*unstructured.Unstructured
	index     map[*unstructured.Unstructured]int // in srcs and objs
}

// readInput reads the config, adds its spec.resources to the listed items and reads them all as
// objects. A problem with the input, rather than with the function, is a result (bad) to answer
// with the input unchanged.
func readInput(fc *kyaml.RNode, listed []source) (in *input, bad framework.Results, err error) {
	cfg, bad, err := readConfig(fc)
	if err != nil || len(bad) > 0 {
		return nil, bad, err
	}
	in = &input{cfg: cfg, opts: cfg.Options(), listed: len(listed)}
	if err := in.addResources(listed); err != nil {
		return nil, nil, err
	}
	if bad := in.readObjects(); bad != nil {
		return nil, framework.Results{bad}, nil
	}
	return in, nil, nil
}

// readConfig parses the functionConfig (none: the defaults). An invalid config is results, one
// per problem of a field, naming the field: the function's answer to it is the input unchanged,
// not a failure to run. Their messages name no line: the function reads its config from the
// ResourceList, and the lines there are not the file's.
func readConfig(fc *kyaml.RNode) (*renderconfig.Config, framework.Results, error) {
	var cfgData []byte
	if fc != nil {
		s, err := fc.String()
		if err != nil {
			return nil, nil, err
		}
		cfgData = []byte(s)
	}
	cfg, err := renderconfig.Parse(cfgData)
	var ce *renderconfig.Error
	switch {
	case errors.As(err, &ce):
		var bad framework.Results
		for _, p := range ce.Problems {
			one := *ce
			one.Problems = []renderconfig.Problem{p}
			bad = append(bad, &framework.Result{Message: one.Error(), Severity: framework.Error, Field: &framework.Field{Path: p.Field}})
		}
		return nil, bad, nil
	case err != nil:
		return nil, framework.Results{{Message: err.Error(), Severity: framework.Error}}, nil
	}
	return cfg, nil, nil
}

// addResources makes the sources the listed items followed by the config's spec.resources, which
// render as if they were listed. The listed sources are copied only if there are resources.
func (in *input) addResources(listed []source) error {
	in.srcs = listed
	for i, r := range in.cfg.Spec.Resources {
		n, err := kyaml.FromMap(r)
		if err != nil {
			return fmt.Errorf("functionConfig spec.resources[%d]: %w", i, err)
		}
		if len(in.generated) == 0 {
			in.srcs = slices.Clip(in.srcs)
		}
		in.generated = append(in.generated, n)
		in.srcs = append(in.srcs, readSource(n.YNode()))
	}
	return nil
}

// readObjects collects the sources' objects; the first source that is not an object is the
// result to answer with.
func (in *input) readObjects() *framework.Result {
	in.objs = make([]*unstructured.Unstructured, len(in.srcs))
	in.index = make(map[*unstructured.Unstructured]int, len(in.srcs))
	for i, s := range in.srcs {
		if s.err != nil {
			return itemResult(i, in.listed, s.file, s.err)
		}
		in.objs[i] = s.obj
		in.index[s.obj] = i
	}
	return nil
}

// fileOfObject is the file an input object came from, for the results that name it.
func (in *input) fileOfObject(u *unstructured.Unstructured) *framework.File {
	if i, ok := in.index[u]; ok {
		return in.srcs[i].file
	}
	return nil
}

// refuse reports findings as results, and answers with the input unchanged.
func (in *input) refuse(results *framework.Results, err error) ([]item, error) {
	*results = append(*results, Results(err, in.objs, in.fileOfObject)...)
	return unchanged(in.listed), nil
}

// expand renders the objects and, unless the sources are kept as written, converts the v1alpha1
// sources kept to v1beta1: converted holds them by index; other items stay as they were. Only
// sources can be v1alpha1 (or the pools a conversion looks up), so converting the sources kept
// is converting the whole expansion.
func (in *input) expand(encode bool) (*bundle.Expansion, map[int]*unstructured.Unstructured, error) {
	x, err := bundle.ExpandEntries(in.objs, in.opts, encode)
	if err != nil {
		return nil, nil, err
	}
	converted := map[int]*unstructured.Unstructured{}
	if !*in.cfg.Spec.KeepSources || in.cfg.Spec.KeepSourceVersions {
		return x, converted, nil
	}
	var kept []*unstructured.Unstructured
	for _, e := range x.Entries {
		if e.Input >= 0 {
			kept = append(kept, in.objs[e.Input])
		}
	}
	conv, err := migrate.Objects(kept)
	if err != nil {
		return nil, nil, err
	}
	for i, u := range conv {
		if u != kept[i] {
			converted[in.index[kept[i]]] = u
		}
	}
	return x, converted, nil
}

// warnings are the expansion's warnings as results: the Sandboxes a preview at spec.now renders
// as past their shutdownTime, so a reviewer sees why their children are missing, and the
// templates whose own NetworkPolicy shuts out the router or DNS.
func (in *input) warnings(ws []bundle.Warning) framework.Results {
	return WarningResults(ws, in.objs, func(u *unstructured.Unstructured, _ string) (*framework.File, int) {
		return in.fileOfObject(u), 0
	})
}

// WarningResults are warnings as results of severity warning, placed as ResultsAt places
// findings: on the object's resourceRef (its apiVersion as written) and field, in its file and
// document (and at the field's line) when locate knows them. The message is the warning's own, as
// the function has always given it; Format adds the object and the field for people. A warning
// never changes the exit code.
func WarningResults(ws []bundle.Warning, objs []*unstructured.Unstructured, locate Locate) framework.Results {
	out := make(framework.Results, 0, len(ws))
	index := objectIndex{objs: objs}
	for _, w := range ws {
		ref := &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{Kind: w.Kind}, NameMeta: kyaml.NameMeta{Name: w.Name, Namespace: w.Namespace}}
		ref.APIVersion = extv1beta1.GroupVersion.String()
		if w.Kind == agentsv1beta1.SandboxKind {
			ref.APIVersion = agentsv1beta1.GroupVersion.String()
		}
		var file *framework.File
		line := 0
		if src := index.find(w.Kind, w.Namespace, w.Name); src != nil {
			ref.APIVersion = src.GetAPIVersion()
			file, line = locate(src, w.Field)
		}
		file, tags := placed(file)
		if tags != nil && line > 0 {
			tags[TagLine] = strconv.Itoa(line)
		}
		out = append(out, &framework.Result{Severity: framework.Warning, Message: w.Message, ResourceRef: ref,
			Field: &framework.Field{Path: w.Field}, File: file, Tags: tags})
	}
	return out
}

// items is the output: the config's copies, then the expansion in its order, each entry as the
// function writes it: a child as rendered, a converted source as converted, a spec.resources
// item as its node, any other source as the input item; a source replaced by a copy of the
// config, or an agent-sandbox source when the sources are not kept, not at all.
func (in *input) items(entries []bundle.Entry, converted map[int]*unstructured.Unstructured, copies []*unstructured.Unstructured, replaced map[*unstructured.Unstructured]bool) []item {
	out := make([]item, 0, len(copies)+len(entries))
	for _, c := range copies {
		out = append(out, item{src: -1, obj: c})
	}
	for _, e := range entries {
		i := e.Input
		switch {
		case i >= 0 && replaced[in.objs[i]]:
		case i < 0:
			out = append(out, item{src: -1, obj: e.Object, text: e.YAML})
		case converted[i] != nil:
			out = append(out, item{src: -1, obj: converted[i]})
		case !*in.cfg.Spec.KeepSources && manifest.IsAgentSandbox(in.objs[i]):
		case i >= in.listed:
			out = append(out, item{src: -1, node: in.generated[i-in.listed]})
		default:
			out = append(out, item{src: i})
		}
	}
	return out
}

// Results turns a render error into KRM results: one per field error of each invalid object,
// naming the object, the field path and, when fileOf knows it, the file; other errors as plain
// results.
func Results(err error, objs []*unstructured.Unstructured, fileOf func(*unstructured.Unstructured) *framework.File) framework.Results {
	return ResultsAt(err, objs, func(u *unstructured.Unstructured, _ string) (*framework.File, int) { return fileOf(u), 0 })
}

// Locate places a finding on an input object: the file the object came from, and the line of the
// field (a field.Path, as the finding names it) in that file, 0 when unknown. A caller that read
// the files finds the line with yamlread.FieldLine, so that a finding names the line a person
// fixes, not the document's first.
type Locate func(obj *unstructured.Unstructured, field string) (*framework.File, int)

// ResultsAt is Results for a caller that also knows the line of each field (the CLI, which read
// the files): findings then name the file, the document and the field's line.
func ResultsAt(err error, objs []*unstructured.Unstructured, locate Locate) framework.Results {
	var out framework.Results
	index := objectIndex{objs: objs}
	var walk func(error)
	walk = func(err error) {
		var ie *render.InvalidError
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
			return
		case *render.InvalidError:
			ie = e
		}
		if ie == nil {
			out = append(out, &framework.Result{Message: err.Error(), Severity: framework.Error})
			return
		}
		src := ie.Source
		if src == nil {
			src = index.find(ie.Kind, ie.Namespace, ie.Name)
		}
		ref := &kyaml.ResourceIdentifier{
			TypeMeta: kyaml.TypeMeta{Kind: ie.Kind},
			NameMeta: kyaml.NameMeta{Name: ie.Name, Namespace: ie.Namespace},
		}
		if src != nil {
			ref.APIVersion = src.GetAPIVersion()
		}
		for _, fe := range ie.Errs {
			var file *framework.File
			line := 0
			if src != nil {
				file, line = locate(src, fe.Field)
			}
			file, tags := placed(file)
			if tags != nil && line > 0 {
				tags[TagLine] = strconv.Itoa(line)
			}
			r := &framework.Result{
				Message:     ie.Object() + ": " + fieldMessage(fe),
				Severity:    framework.Error,
				ResourceRef: ref,
				Field:       &framework.Field{Path: fe.Field},
				File:        file,
				Tags:        tags,
			}
			if fe.BadValue != nil && fe.Type != field.ErrorTypeRequired && fe.Type != field.ErrorTypeForbidden {
				r.Field.CurrentValue = fe.BadValue
				if s, isString := fe.BadValue.(string); isString && utf8.RuneCountInString(s) > quote.Max {
					r.Field.CurrentValue = quote.Cut(s) // the message says how long it is
				}
			}
			out = append(out, r)
		}
	}
	walk(err)
	return out
}

// fieldMessage is fe.Error() with a long string value cut (quote.Value): apimachinery writes the
// value whole, and a 10 MB name gave 20 MB of standard error.
func fieldMessage(fe *field.Error) string {
	s, isString := fe.BadValue.(string)
	if !isString || utf8.RuneCountInString(s) <= quote.Max {
		return fe.Error()
	}
	switch fe.Type {
	case field.ErrorTypeInvalid, field.ErrorTypeTypeInvalid, field.ErrorTypeNotSupported, field.ErrorTypeNotFound,
		field.ErrorTypeDuplicate, field.ErrorTypeTooMany, field.ErrorTypeTooFew:
		msg := fmt.Sprintf("%s: %s: %s", fe.Field, fe.Type, quote.Value(s))
		if fe.Detail != "" {
			msg += ": " + fe.Detail
		}
		return msg
	}
	return fe.Error()
}

// objectIndex finds the input object a finding or a warning names. Searching the list once per
// finding made n invalid objects cost n² (issue 37: 20,000 Sandboxes with two findings each took
// 70 s); the map is built on the first lookup, so a run without findings never builds it.
type objectIndex struct {
	objs  []*unstructured.Unstructured
	byKey map[objectKey]*unstructured.Unstructured
}

type objectKey struct{ kind, namespace, name string }

// find is the first object of the list of that kind, namespace and name, or nil.
func (x *objectIndex) find(kind, namespace, name string) *unstructured.Unstructured {
	if x.byKey == nil {
		x.byKey = make(map[objectKey]*unstructured.Unstructured, len(x.objs))
		for _, o := range x.objs {
			k := objectKey{o.GetKind(), o.GetNamespace(), o.GetName()}
			if _, dup := x.byKey[k]; !dup {
				x.byKey[k] = o
			}
		}
	}
	return x.byKey[objectKey{kind, namespace, name}]
}

// itemResult reports an item that is not an object. Items after the list's own are the
// functionConfig's spec.resources.
func itemResult(i, listed int, file *framework.File, err error) *framework.Result {
	where := fmt.Sprintf("items[%d]", i)
	if i >= listed {
		where = fmt.Sprintf("functionConfig spec.resources[%d]", i-listed)
	}
	file, tags := placed(file)
	return &framework.Result{Message: where + ": " + err.Error(), Severity: framework.Error,
		Field: &framework.Field{Path: where}, File: file, Tags: tags}
}

// indexUnknown is the File.Index of a file known by name only (kustomize's origin annotation).
const indexUnknown = -1

// placed turns a file into what a result carries: the KRM 0-based index, and the 1-based
// document number as a tag when it is known.
func placed(f *framework.File) (*framework.File, map[string]string) {
	if f == nil {
		return nil, nil
	}
	if f.Index == indexUnknown {
		return &framework.File{Path: f.Path}, nil
	}
	return f, FileTags(f.Index+1, 0)
}

// fileOf is the file an item came from: kyaml's path and index annotations, or kustomize's origin
// annotation (buildMetadata: [originAnnotations]). It reads the node defensively: it runs on
// items that may not be objects at all (kyaml's own accessors panic on metadata: [a]).
func fileOf(n *kyaml.Node) *framework.File {
	if n == nil {
		return nil
	}
	ann := annotations(n)
	path, index := ann[kioutil.PathAnnotation], ann[kioutil.IndexAnnotation]
	if path == "" {
		path, index = ann[kioutil.LegacyPathAnnotation], ann[kioutil.LegacyIndexAnnotation]
	}
	if path == "" {
		// kustomize's index annotation counts items of the whole list, not documents of the file.
		index = strconv.Itoa(indexUnknown)
		origin := ann[originAnnotation]
		if origin == "" {
			return nil
		}
		var o struct {
			Path string `json:"path"`
		}
		if err := yaml.Unmarshal([]byte(origin), &o); err != nil || o.Path == "" {
			return nil
		}
		path = o.Path
	}
	i, _ := strconv.Atoi(index)
	return &framework.File{Path: path, Index: i}
}

// annotations are an item's string annotations, read without assuming the item is well formed.
func annotations(n *kyaml.Node) map[string]string {
	out := map[string]string{}
	md := child(n, "metadata")
	ann := child(md, "annotations")
	if ann == nil || ann.Kind != kyaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(ann.Content); i += 2 {
		k, v := ann.Content[i], ann.Content[i+1]
		if k.Kind == kyaml.ScalarNode && v.Kind == kyaml.ScalarNode {
			out[k.Value] = v.Value
		}
	}
	return out
}

// child is the value of key in a mapping node, or nil.
func child(n *kyaml.Node, key string) *kyaml.Node {
	if n == nil || n.Kind != kyaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == kyaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Tags a result carries to place it in its file for people: the 1-based document number and
// line, when known. framework.File's index is 0-based and cannot say "unknown" (kustomize's origin
// annotation names a file but no document).
const (
	TagDocument = "sandbox-gitops.dev/document"
	TagLine     = "sandbox-gitops.dev/line"
)

// FileTags are the tags placing a finding at a 1-based document (and line, when > 0).
func FileTags(document, line int) map[string]string {
	t := map[string]string{TagDocument: strconv.Itoa(document)}
	if line > 0 {
		t[TagLine] = strconv.Itoa(line)
	}
	return t
}

// Format writes results for people: one line each, led by the file, the 1-based document number
// and the line when known. A finding's message names its object and field already; a warning's
// (WarningResults) does not, so they are written before it, as a finding writes them.
func Format(results framework.Results) string {
	// Sized first: grown a doubling at a time, the text of 40,000 findings was copied and
	// collected as often as it was written (issue 37).
	size := 0
	for _, r := range results {
		size += len(r.Message) + 64
		if r.File != nil {
			size += len(r.File.Path)
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, r := range results {
		if r.File != nil && r.File.Path != "" {
			b.WriteString(r.File.Path)
			if d := r.Tags[TagDocument]; d != "" {
				b.WriteString(": document " + d)
				if l := r.Tags[TagLine]; l != "" {
					b.WriteString(" (line " + l + ")")
				}
			}
			b.WriteString(": ")
		}
		msg := r.Message
		if r.Severity == framework.Warning && r.ResourceRef != nil && r.Field != nil {
			msg = bundle.Warning{Kind: r.ResourceRef.Kind, Namespace: r.ResourceRef.Namespace, Name: r.ResourceRef.Name, Field: r.Field.Path, Message: msg}.String()
		}
		fmt.Fprintf(&b, "%s: %s\n", r.Severity, oneLine(msg))
	}
	return b.String()
}

// oneLine escapes the control characters of a message, as strconv.Quote would, so that a value
// holding a newline (a name, a key) cannot split a finding in two or forge another.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
