package krm

import (
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

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
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
	var cfgData []byte
	if fc != nil {
		s, err := fc.String()
		if err != nil {
			return nil, err
		}
		cfgData = []byte(s)
	}
	cfg, err := renderconfig.Parse(cfgData)
	if err != nil {
		*results = append(*results, &framework.Result{Message: err.Error(), Severity: framework.Error})
		return unchanged(len(listed)), nil
	}

	srcs := listed
	var generated []*kyaml.RNode // spec.resources, after the listed items
	for i, r := range cfg.Spec.Resources {
		n, err := kyaml.FromMap(r)
		if err != nil {
			return nil, fmt.Errorf("functionConfig spec.resources[%d]: %w", i, err)
		}
		if len(generated) == 0 {
			srcs = slices.Clip(srcs)
		}
		generated = append(generated, n)
		srcs = append(srcs, readSource(n.YNode()))
	}
	objs := make([]*unstructured.Unstructured, len(srcs))
	index := make(map[*unstructured.Unstructured]int, len(srcs))
	for i, s := range srcs {
		if s.err != nil {
			*results = append(*results, itemResult(i, len(listed), s.file, s.err))
			return unchanged(len(listed)), nil
		}
		objs[i] = s.obj
		index[s.obj] = i
	}
	fileOf := func(u *unstructured.Unstructured) *framework.File {
		if i, ok := index[u]; ok {
			return srcs[i].file
		}
		return nil
	}

	entries, err := bundle.ExpandEntries(objs, cfg.Options(), encode)
	if err != nil {
		*results = append(*results, Results(err, objs, fileOf)...)
		return unchanged(len(listed)), nil
	}
	// converted holds the v1alpha1 sources that come out as v1beta1; other items stay as they
	// were. Only sources can be v1alpha1 (or the pools a conversion looks up), so converting the
	// sources kept is converting the whole expansion.
	converted := map[int]*unstructured.Unstructured{}
	if *cfg.Spec.KeepSources && !cfg.Spec.KeepSourceVersions {
		var kept []*unstructured.Unstructured
		for _, e := range entries {
			if e.Input >= 0 {
				kept = append(kept, objs[e.Input])
			}
		}
		conv, err := bundle.ConvertSources(kept)
		if err != nil {
			*results = append(*results, Results(err, objs, fileOf)...)
			return unchanged(len(listed)), nil
		}
		for i, u := range conv {
			if u != kept[i] {
				converted[index[kept[i]]] = u
			}
		}
	}
	for _, w := range bundle.ExpiryWarnings(objs, cfg.Options()) {
		*results = append(*results, &framework.Result{Severity: framework.Warning, Message: w.Message,
			ResourceRef: &kyaml.ResourceIdentifier{TypeMeta: kyaml.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: w.Kind},
				NameMeta: kyaml.NameMeta{Name: w.Name, Namespace: w.Namespace}},
			Field: &framework.Field{Path: w.Field}})
	}
	if cfg.Spec.Mode == renderconfig.ModeValidate {
		*results = append(*results, &framework.Result{Severity: framework.Info,
			Message: fmt.Sprintf("%d objects checked; the agent-sandbox ones render without error", len(objs))})
		return unchanged(len(listed)), nil
	}
	copies, replaced, err := configCopies(cfg, fc != nil, objs)
	if err != nil {
		*results = append(*results, Results(err, objs, fileOf)...)
		return unchanged(len(listed)), nil
	}
	out := make([]item, 0, len(copies)+len(entries))
	for _, c := range copies {
		out = append(out, item{src: -1, obj: c})
	}
	for _, e := range entries {
		i := e.Input
		switch {
		case i >= 0 && replaced[objs[i]]:
		case i < 0:
			out = append(out, item{src: -1, obj: e.Object, text: e.YAML})
		case converted[i] != nil:
			out = append(out, item{src: -1, obj: converted[i]})
		case !*cfg.Spec.KeepSources && manifest.IsAgentSandbox(objs[i]):
		case i >= len(listed):
			out = append(out, item{src: -1, node: generated[i-len(listed)]})
		default:
			out = append(out, item{src: i})
		}
	}
	return out, nil
}

// Results turns a render error into KRM results: one per field error of each invalid object,
// naming the object, the field path and, when fileOf knows it, the file; other errors as plain
// results.
func Results(err error, objs []*unstructured.Unstructured, fileOf func(*unstructured.Unstructured) *framework.File) framework.Results {
	return ResultsAt(err, objs, func(u *unstructured.Unstructured) (*framework.File, int) { return fileOf(u), 0 })
}

// ResultsAt is Results for a caller that also knows the line each object starts on (the CLI,
// which read the files): findings then name the file, the document and the line.
func ResultsAt(err error, objs []*unstructured.Unstructured, locate func(*unstructured.Unstructured) (*framework.File, int)) framework.Results {
	var out framework.Results
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
			src = find(objs, ie)
		}
		ref := &kyaml.ResourceIdentifier{
			TypeMeta: kyaml.TypeMeta{Kind: ie.Kind},
			NameMeta: kyaml.NameMeta{Name: ie.Name, Namespace: ie.Namespace},
		}
		var file *framework.File
		line := 0
		if src != nil {
			ref.APIVersion = src.GetAPIVersion()
			file, line = locate(src)
		}
		file, tags := placed(file)
		if tags != nil && line > 0 {
			tags[TagLine] = strconv.Itoa(line)
		}
		for _, fe := range ie.Errs {
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

func find(objs []*unstructured.Unstructured, ie *render.InvalidError) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == ie.Kind && o.GetNamespace() == ie.Namespace && o.GetName() == ie.Name {
			return o
		}
	}
	return nil
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
// and the line when known.
func Format(results framework.Results) string {
	var b strings.Builder
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
		fmt.Fprintf(&b, "%s: %s\n", r.Severity, oneLine(r.Message))
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
