// Package kbuild builds a kustomization in process with sigs.k8s.io/kustomize/api, exactly as
// `kustomize build --enable-alpha-plugins --enable-exec` does, so rendering a GitOps tree needs no
// kustomize binary and gives the same bytes. The sandbox-render function in the tree runs as this
// very executable, whatever path its config names; when it is the last step of the root
// kustomization it runs in process, in one pass over kustomize's build of the rest of the tree
// (linear in the number of objects, where kustomize's own handling of a function's output is
// quadratic); and the output can be written as one file per object for the rendered-manifests
// pattern (Flux, Argo CD without plugins).
package kbuild

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	goyaml "go.yaml.in/yaml/v2"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/resid"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// functionAnnotation carries a KRM function's runtime in its config; originAnnotation is where
// kustomize records where an object came from (buildMetadata: [originAnnotations]).
const (
	functionAnnotation = "config.kubernetes.io/function"
	originAnnotation   = "config.kubernetes.io/origin"
)

// Options tune a build.
type Options struct {
	// NoFastPath always runs the SandboxRender function as kustomize runs it (as a process, through
	// kustomize's resource map), even where the one-pass render applies. Tests use it to compare
	// both paths.
	NoFastPath bool
	// NoElide hands kustomize every file as it is, wide mappings included (see elider). Tests use
	// it to compare both.
	NoElide bool
}

// Object is one object of a build's output: a resource of kustomize's resource map, or an object
// the one-pass render made (its YAML computed as kustomize would print it).
type Object struct {
	ID  resid.ResId
	res *resource.Resource
	obj map[string]any
	// restore are the mappings elided in res (see elider), put back when it is printed.
	restore []*elision
}

// YAML is the object as kustomize build prints it. kustomize goes through JSON and back with
// go-yaml v2 (sigs.k8s.io/yaml.JSONToYAML), which costs as much as the whole render on large
// trees; a rendered object holds only JSON's types already, so go-yaml v2 encodes it to the
// same bytes directly (same key order, same quoting).
func (o Object) YAML() ([]byte, error) {
	if len(o.restore) > 0 {
		return restoredYAML(o)
	}
	if o.res != nil {
		return o.res.AsYAML()
	}
	return goyaml.Marshal(o.obj)
}

// Result is a build's output, in kustomize's output order.
type Result struct {
	// Objects are the objects, as kustomize would emit them.
	Objects []Object
	// FastPath tells whether the SandboxRender function ran in process in one pass (see
	// Build); FallbackReason says why not, when the tree has a SandboxRender config.
	FastPath       bool
	FallbackReason string
	// Rendered tells whether a SandboxRender function ran anywhere in the build; Sources are the
	// files the build read.
	Rendered bool
	Sources  []string
	// Warnings are the render's warnings (severity warning), placed as findings are: they do not
	// fail the build, and kustomize itself drops them.
	Warnings framework.Results
	// read are the files the build read, as they were on disk.
	read []source
	// elided tells whether kustomize read wide mappings elided (see elider).
	elided bool
}

// YAML is the output as `kustomize build` prints it. Objects are encoded on every core: on large
// trees encoding costs as much as the render.
func (r *Result) YAML() ([]byte, error) {
	docs, err := r.documents()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for i, b := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

func (r *Result) documents() ([][]byte, error) {
	docs := make([][]byte, len(r.Objects))
	errs := make([]error, len(r.Objects))
	parallel.Each(len(r.Objects), func(i int) { docs[i], errs[i] = r.Objects[i].YAML() })
	return docs, errors.Join(errs...)
}

// FindingsError is a build that failed because the render found problems in the input (exit
// code 1 of the CLI), as opposed to a tree kustomize cannot build (exit code 2).
type FindingsError struct {
	// Report is one line per problem, led by the file.
	Report string
	// Count is the number of problems.
	Count int
}

func (e *FindingsError) Error() string {
	return fmt.Sprintf("the input has %d problem(s):\n%s", e.Count, strings.TrimRight(e.Report, "\n"))
}

// Build builds the kustomization in dir with the options of `kustomize build --enable-alpha-plugins
// --enable-exec` (load restrictions RootOnly, no managed-by label, kustomize's default ordering).
// self is the executable that runs SandboxRender function configs.
//
// When the last transformer of the root kustomization is a SandboxRender config (the documented
// layout), Build builds the tree without it with kustomize and renders kustomize's result in
// one pass in process, then orders the objects as kustomize does: the same bytes as kustomize
// running the function, in time linear in the number of objects. It falls back to kustomize
// running the function when anything kustomize does after its transformers could treat the
// rendered objects differently: validators, vars, buildMetadata other than originAnnotations,
// sortOptions other than legacy, objects marked local-config, or names that change after the
// transformers (namePrefix, nameSuffix, generated names with a hash suffix).
func Build(dir, self string, o Options) (*Result, error) {
	var e *elider
	if !o.NoElide {
		var err error
		if e, err = newElider(); err != nil {
			return nil, err
		}
	}
	results, err := os.MkdirTemp("", "sandbox-render-results-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(results)
	fn := function{path: self, results: results}
	res, err := build(dir, fn, o, e)
	if e == nil || e.empty() {
		return res, err
	}
	// The render's findings are about agent-sandbox objects, which are never elided.
	var findings *FindingsError
	if errors.As(err, &findings) {
		return res, err
	}
	if err == nil {
		why := treeIsSafe(res.read)
		if why == "" {
			why = e.restore(res)
		}
		if why == "" {
			res.elided = true
			return res, nil
		}
	}
	// kustomize may have read an elided mapping, or failed on one: build again as it is.
	return build(dir, fn, o, nil)
}

// function is how a build runs SandboxRender function configs when kustomize runs them: the
// executable (sandbox-render), and the directory it writes its results into (ResultsDirFlag).
type function struct {
	path, results string
}

// remote tells a kustomization kustomize fetches (a URL) from one on disk.
func remote(dir string) bool {
	return strings.Contains(dir, "://") || strings.HasPrefix(dir, "git@")
}

func build(dir string, fn function, o Options, e *elider) (*Result, error) {
	if remote(dir) {
		// A remote kustomization: kustomize fetches it; nothing to plan on disk.
		return slowBuild(dir, fn, "", e)
	}
	if info, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: build takes the directory of a kustomization", dir)
	}
	var reason string
	plan, err := planFastPath(dir)
	switch {
	case err != nil:
		return nil, err
	case o.NoFastPath:
		reason = "disabled by the caller"
	case plan.reason != "":
		reason = plan.reason
	}
	if plan.config != nil && reason == "" {
		res, fallback, err := fastBuild(dir, fn, plan, e)
		if err != nil || fallback == "" {
			return res, err
		}
		reason = fallback
	}
	res, err := slowBuild(dir, fn, plan.kustPath, e)
	if res != nil && plan.config != nil {
		res.FallbackReason = reason
	}
	return res, err
}

// fastPlan is what the root kustomization says about the one-pass render.
type fastPlan struct {
	kustPath  string // the root kustomization file
	config    []byte // the SandboxRender config, when it is the last transformer
	configAt  string // its file
	configRel string // its file as the kustomization names it
	rewritten []byte // the root kustomization without it
	reason    string // why the fast path does not apply, when config is set
	origins   bool   // the user asked for origin annotations
	sort      any    // the root kustomization's sortOptions
}

// KustomizationFileNames are the names a kustomization file may have, in the order kustomize
// looks for them in a directory: kustomize's own list, so that what kbuild and sandbox-render
// take for a kustomization is what kustomize builds. Not to be modified.
var KustomizationFileNames = konfig.RecognizedKustomizationFileNames()

func planFastPath(dir string) (*fastPlan, error) {
	p := &fastPlan{}
	var data []byte
	for _, n := range KustomizationFileNames {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err == nil {
			p.kustPath, data = filepath.Join(dir, n), b
			break
		}
	}
	if p.kustPath == "" {
		return nil, fmt.Errorf("%s holds no kustomization.yaml: build takes the directory of a kustomization", dir)
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil || k == nil {
		return p, nil // kustomize reports it
	}
	ts, _ := k["transformers"].([]any)
	if len(ts) == 0 {
		return p, nil
	}
	last, _ := ts[len(ts)-1].(string)
	if last == "" || strings.Contains(last, "\n") {
		return p, nil
	}
	cfg, err := os.ReadFile(filepath.Join(dir, last))
	if err != nil {
		return p, nil
	}
	if err := checkRenderConfig(dir, filepath.Join(dir, last), cfg); err != nil {
		return nil, err
	}
	if !isSandboxRenderConfig(cfg) {
		return p, nil
	}
	p.config, p.configAt, p.configRel = cfg, filepath.Join(dir, last), filepath.Clean(last)
	if len(ts) == 1 {
		delete(k, "transformers")
	} else {
		k["transformers"] = ts[:len(ts)-1]
	}
	switch bm, _ := k["buildMetadata"].([]any); {
	case k["validators"] != nil:
		p.reason = "the root kustomization has validators"
	case k["vars"] != nil:
		p.reason = "the root kustomization has vars"
	case k["sortOptions"] != nil && !legacySort(k["sortOptions"]):
		p.reason = "the root kustomization's sortOptions are not legacy"
	case len(bm) > 1 || len(bm) == 1 && bm[0] != types.OriginAnnotations:
		p.reason = "the root kustomization asks for buildMetadata other than originAnnotations"
	default:
		p.origins = len(bm) == 1
		p.sort = k["sortOptions"]
	}
	// Origin annotations name each object's file in the render's findings; they are removed
	// again unless the user asked for them.
	k["buildMetadata"] = []any{types.OriginAnnotations}
	p.rewritten, err = yaml.Marshal(k)
	return p, err
}

func legacySort(v any) bool {
	m, _ := v.(map[string]any)
	return m["order"] == string(types.LegacySortOrder)
}

// checkRenderConfig checks the root kustomization's last transformer, when it is a SandboxRender,
// as render checks its config: with the one reader (checkYAML: a problem of the input), then as
// the configuration (renderconfig: a configuration error, in render's words). Either way it is
// checked before kustomize reads it, on both paths: kustomize reads the config's metadata with
// kyaml, and says "missing metadata.name", "wrong node kind" or "unable to find plugin root"
// where render names the field and its line (metadata: [a], an annotations list, an exec
// annotation that is not a string).
func checkRenderConfig(dir, path string, b []byte) error {
	if sandboxRenderNode(b) == nil {
		return nil
	}
	if err := checkYAML(b); err != nil {
		return newPlacer(dir, nil).unreadable([]badFile{{abs(path), err}})
	}
	if _, err := renderconfig.Parse(b); err != nil {
		return configError(path, err)
	}
	return nil
}

// configError is a SandboxRender config renderconfig refused, as render words it: each problem
// led by the file and its line.
func configError(path string, err error) error {
	var ce *renderconfig.Error
	if errors.As(err, &ce) {
		return errors.New(ce.In(path))
	}
	return fmt.Errorf("%s: %w", path, err)
}

// sandboxRenderNode is the one object a file holds when it is a SandboxRender (whatever its
// metadata), or nil.
func sandboxRenderNode(b []byte) *kyaml.RNode {
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
	if err != nil || len(nodes) != 1 || !isMapping(nodes[0]) {
		return nil
	}
	if n := nodes[0]; n.GetApiVersion() == renderconfig.APIVersion && n.GetKind() == renderconfig.Kind {
		return n
	}
	return nil
}

// isSandboxRenderConfig tells whether a file holds exactly one object, a SandboxRender with an
// exec function annotation.
func isSandboxRenderConfig(b []byte) bool {
	n := sandboxRenderNode(b)
	return n != nil && strings.Contains(annotationsOf(n)[functionAnnotation], "exec")
}

// isMapping tells whether n is a mapping, the one kind of node kyaml's accessors (GetKind,
// GetApiVersion, GetName, GetAnnotations, ...) read safely: they index any node's content as a
// mapping's keys and values, and a list of odd length panics (index out of range). kio.ByteReader
// gives such nodes: a document that is a list (- a), or a List's item that is one (items: [[a]]),
// which it unwraps. Every node of a file is checked with it before those accessors run.
func isMapping(n *kyaml.RNode) bool {
	y := n.YNode()
	return y != nil && y.Kind == kyaml.MappingNode
}

// annotationsOf is n's metadata.annotations, or nil when metadata or annotations is not a map:
// kyaml's GetAnnotations indexes a list or a scalar there as if it were a map's key-value pairs
// and panics (`metadata: [a]`), and such a file is kustomize's to refuse, not ours to crash on.
func annotationsOf(n *kyaml.RNode) map[string]string {
	meta := n.Field("metadata")
	if meta == nil || meta.Value == nil || meta.Value.YNode().Kind != kyaml.MappingNode {
		return nil
	}
	annotations := meta.Value.Field("annotations")
	if annotations == nil || annotations.Value == nil || annotations.Value.YNode().Kind != kyaml.MappingNode {
		return nil
	}
	return n.GetAnnotations()
}

// renameRisk finds what can change names after the transformers in the files a build read:
// kustomize then fixes the references to them in every object, rendered ones included.
var renameRisk = regexp.MustCompile(`(?m)^\s*(namePrefix|nameSuffix|configMapGenerator|secretGenerator|vars)\s*:|kind:\s*(PrefixSuffixTransformer|PrefixTransformer|SuffixTransformer|HashTransformer|ConfigMapGenerator|SecretGenerator)\b|allowNameChange|needs-hash|config\.kubernetes\.io/local-config`)

// fastBuild builds the tree without the render config (p.rewritten), then renders the result in
// one pass in process (krm.Transform) and orders it as kustomize would; the reason, when the
// tree has what could change names after the render, is the caller's cue to fall back.
func fastBuild(dir string, fn function, p *fastPlan, e *elider) (*Result, string, error) {
	if _, err := readResults(fn.results); err != nil { // an earlier attempt's
		return nil, "", err
	}
	fs := newSelfFS(fn, e)
	fs.replace = map[string][]byte{abs(p.kustPath): p.rewritten}
	m, err := run(fs, dir)
	if err != nil {
		// Without the render the tree must build; if it does not, kustomize's error is the
		// same with the render.
		return nil, "", err
	}
	for _, src := range fs.sources() {
		if loc := renameRisk.FindIndex(src.data); loc != nil {
			return nil, fmt.Sprintf("%s has %q (names may change, or objects be dropped, after the render)", src.path, strings.TrimSpace(string(src.data[loc[0]:loc[1]]))), nil
		}
	}
	// The config was checked as render checks it when the build was planned (checkRenderConfig).
	cfg, err := kyaml.Parse(string(p.config))
	if err != nil {
		return nil, "", err
	}
	items := m.ToRNodeSlice()
	index := make(map[*kyaml.RNode]int, len(items))
	for i, n := range items {
		index[n] = i
	}
	out, results, err := krm.Transform(items, cfg)
	if err != nil {
		return nil, "", err
	}
	if results.ExitCode() != 0 {
		return nil, "", newPlacer(dir, fs.sources()).findings(results)
	}
	// Renders of bases that kustomize ran may have handed their warnings over too.
	handed, err := readResults(fn.results)
	if err != nil {
		return nil, "", err
	}
	warnings := newPlacer(dir, fs.sources()).warnings(append(handed, results...))
	if !p.origins {
		if err := m.RemoveOriginAnnotations(); err != nil {
			return nil, "", err
		}
	}
	origin, err := p.origin(cfg)
	if err != nil {
		return nil, "", err
	}
	list := fastObjects(out, m.Resources(), index, origin)
	if err := sortLegacy(list, p.sort); err != nil {
		return nil, "", err
	}
	return &Result{Objects: list, FastPath: true, Rendered: true, Sources: append(fs.paths(), abs(p.configAt)), read: fs.sources(), Warnings: warnings}, "", nil
}

// origin is the origin annotation kustomize gives what the function made when origin
// annotations are asked for: configured by the config, in its file. "" when they are not.
func (p *fastPlan) origin(cfg *kyaml.RNode) (string, error) {
	if !p.origins {
		return "", nil
	}
	o := resource.Origin{ConfiguredIn: p.configRel, ConfiguredBy: kyaml.ResourceIdentifier{
		TypeMeta: kyaml.TypeMeta{APIVersion: cfg.GetApiVersion(), Kind: cfg.GetKind()},
		NameMeta: kyaml.NameMeta{Name: cfg.GetName(), Namespace: cfg.GetNamespace()},
	}}
	return o.String()
}

// fastObjects are the function's output as a build's objects: an item passed through as the
// resource kustomize built (resources, found by its index), an object the render made with the
// origin annotation when there is one.
func fastObjects(out []krm.Output, resources []*resource.Resource, index map[*kyaml.RNode]int, origin string) []Object {
	list := make([]Object, 0, len(out))
	for _, o := range out {
		if o.Node != nil {
			r := resources[index[o.Node]]
			list = append(list, Object{ID: r.CurId(), res: r})
			continue
		}
		u := o.Object
		if origin != "" {
			a := u.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[originAnnotation] = origin
			u.SetAnnotations(a)
		}
		g, v := resid.ParseGroupVersion(u.GetAPIVersion())
		list = append(list, Object{ID: resid.NewResIdWithNamespace(resid.Gvk{Group: g, Version: v, Kind: u.GetKind()}, u.GetName(), u.GetNamespace()), obj: u.Object})
	}
	return list
}

func objects(m resmap.ResMap) []Object {
	rs := m.Resources()
	out := make([]Object, len(rs))
	for i, r := range rs {
		out[i] = Object{ID: r.CurId(), res: r}
	}
	return out
}

// slowBuild is kustomize running the function. It asks kustomize for origin annotations, so the
// function's findings name their files, and removes them again unless the user asked for them.
func slowBuild(dir string, fn function, kustPath string, e *elider) (*Result, error) {
	if _, err := readResults(fn.results); err != nil { // an earlier attempt's
		return nil, err
	}
	fs := newSelfFS(fn, e)
	asked := true
	if b, err := os.ReadFile(kustPath); err == nil {
		var k map[string]any
		if yaml.Unmarshal(b, &k) == nil && k != nil {
			bm, _ := k["buildMetadata"].([]any)
			asked = false
			for _, v := range bm {
				asked = asked || v == types.OriginAnnotations
			}
			if !asked {
				k["buildMetadata"] = append(bm, types.OriginAnnotations)
				if out, err := yaml.Marshal(k); err == nil {
					fs.replace = map[string][]byte{abs(kustPath): out}
				} else {
					asked = true
				}
			}
		}
	}
	m, err := run(fs, dir)
	if err != nil {
		return nil, err
	}
	if !asked {
		if err := m.RemoveOriginAnnotations(); err != nil {
			return nil, err
		}
	}
	handed, err := readResults(fn.results)
	if err != nil {
		return nil, err
	}
	return &Result{Objects: objects(m), Rendered: fs.renders(), Sources: fs.paths(), read: fs.sources(),
		Warnings: newPlacer(dir, fs.sources()).warnings(handed)}, nil
}

func run(fs selfFS, dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	pc := types.EnabledPluginConfig(types.BploUseStaticallyLinked)
	pc.FnpLoadingOptions.EnableExec = true
	opts.PluginConfig = pc
	m, err := kustomize(krusty.MakeKustomizer(opts), fs, dir)
	// A file render would refuse to read is a problem of the input whatever kustomize made of
	// it (it stops on the error ReadFile returned, in words of its own around ours).
	if bad := fs.unreadable(); len(bad) > 0 {
		return nil, newPlacer(dir, nil).unreadable(bad)
	}
	if err != nil {
		// A file render cannot read, not named as YAML, that kustomize failed on: placed as
		// render places it (kustomize counts the line from the start of the document, and
		// names neither the document nor, for a transformer's config, the file).
		if bad := fs.unnamedUnreadable(err); len(bad) > 0 {
			return nil, newPlacer(dir, nil).unreadable(bad)
		}
		if m := execFailure.FindStringSubmatch(err.Error()); m != nil && m[1] == "1" {
			results, rerr := readResults(fs.fn.results)
			if rerr != nil {
				return nil, rerr
			}
			// The warnings of renders that succeeded before are left out: a failed build
			// reports its problems, as the render in process does.
			if results = withSeverity(results, framework.Warning, true); len(results) > 0 {
				return nil, newPlacer(dir, fs.sources()).findings(results)
			}
		}
		return nil, cleanError(err)
	}
	return m, nil
}

// checkYAML reads a file of the tree as render reads YAML (manifest/yamlread): kustomize's reader
// takes the last of two equal keys, UTF-16, and aliases that expand without bound, so a
// kustomization with resources: listed twice built from the second list alone. A document that
// is an object (a mapping with apiVersion and kind: a resource, a patch, a List, a
// kustomization) is read as render reads one (yamlread.ReadDocument), and its metadata checked
// as render checks it (checkMetadata): kustomize reads metadata with kyaml, which builds
// metadata: [a] as an object without a name, and an annotation k: [v] as k: "".
// The error names the document and the line in the file, as render's does; the caller adds the
// file.
func checkYAML(b []byte) error {
	nodes, err := yamlread.ReadNodes(b)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if !isObjectNode(n.Node) {
			if _, err := yamlread.NodeValue(n.Node); err != nil {
				return fmt.Errorf("document %d, %w", n.Index, err)
			}
			continue
		}
		docs, err := yamlread.ReadDocument(n)
		if err != nil {
			return err
		}
		if err := checkMetadata(n, docs); err != nil {
			return err
		}
	}
	return nil
}

// isObjectNode tells a document written as an object: a mapping with apiVersion and kind.
func isObjectNode(n *kyaml.Node) bool {
	return childNode(n, "apiVersion") != nil && childNode(n, "kind") != nil
}

// childNode is the value of key in a mapping node, or nil.
func childNode(n *kyaml.Node, key string) *kyaml.Node {
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

// checkMetadata refuses the first object of a document (its object, or a List's item) whose
// metadata render refuses in every object (yamlread.MetadataProblems), at the field's line. A
// SandboxRender is render's configuration, whose metadata is a configuration error (exit code 2)
// in render: checkRenderConfig checks the root's, renderconfig any other.
func checkMetadata(n yamlread.Node, docs []yamlread.Document) error {
	kind := childNode(n.Node, "kind")
	items := childNode(n.Node, "items")
	list := len(docs) != 1 || kind.Kind == kyaml.ScalarNode && strings.HasSuffix(kind.Value, "List") && items != nil && items.Kind == kyaml.SequenceNode
	for i, d := range docs {
		o := d.Object
		if o.GetAPIVersion() == renderconfig.APIVersion && o.GetKind() == renderconfig.Kind {
			continue
		}
		errs := yamlread.MetadataProblems(o.Object, nil)
		if len(errs) == 0 {
			continue
		}
		path, where := errs[0].Field, ""
		if list {
			path, where = fmt.Sprintf("items[%d].%s", i, path), fmt.Sprintf("items[%d] of the %s: ", i, kind.Value)
		}
		line := yamlread.FieldLine(n.Node, path)
		if line == 0 {
			line = n.Line
		}
		return fmt.Errorf("document %d, line %d: %s%s", n.Index, line, where, errs[0].Error())
	}
	return nil
}

// isYAMLFile tells the files a build reads as YAML: kustomizations, and resources, patches and
// configs by their extension. Files a generator reads (configMapGenerator files: and envs:) are
// data, whatever their name, and are not checked.
func isYAMLFile(path string) bool {
	if slices.Contains(KustomizationFileNames, filepath.Base(path)) {
		return true
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// generatorFiles are the files a kustomization's generators read, absolute.
func generatorFiles(kustPath string, k map[string]any) []string {
	var out []string
	add := func(entry any) {
		s, _ := entry.(string)
		if s == "" {
			return
		}
		if _, path, found := strings.Cut(s, "="); found { // key=path
			s = path
		}
		out = append(out, abs(filepath.Join(filepath.Dir(kustPath), s)))
	}
	for _, key := range []string{"configMapGenerator", "secretGenerator"} {
		gens, _ := k[key].([]any)
		for _, g := range gens {
			gm, _ := g.(map[string]any)
			for _, list := range []string{"files", "envs"} {
				entries, _ := gm[list].([]any)
				for _, e := range entries {
					add(e)
				}
			}
			add(gm["env"])
		}
	}
	return out
}

// execFailure is how kustomize wraps an exec function's failure; the function has written its
// results for the build (exit status 1), or its own messages to standard error, before.
var execFailure = regexp.MustCompile(`couldn't execute function: exit status (\d+)`)

// cleanError turns kustomize's report of a failed exec function into a short error: the
// function's own messages were written to standard error already.
func cleanError(err error) error {
	m := execFailure.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if m[1] == "1" {
		return &FindingsError{Report: "", Count: -1}
	}
	return errors.New("a KRM function of the tree failed (exit status " + m[1] + "); its messages are above")
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return a
}

// selfFS is the disk, except that SandboxRender function configs read through it run fn (see
// rewriteExecPath), files in replace are read with the given content, and, with an elider, wide
// mappings are elided. Other files, and other functions, are read as they are. It records every
// file read.
type selfFS struct {
	filesys.FileSystem
	fn      function
	replace map[string][]byte
	elide   *elider
	mu      *sync.Mutex
	read    *[]source
	ours    *bool
	// bad are the files render would refuse to read (checkYAML); data are the generators' files,
	// which are not YAML to check. unnamed are the files render would refuse to read that are
	// not named as YAML (*.yaml, *.yml, *.json): kustomize reads resources, patches and configs
	// as YAML whatever their names, but such a file may be data (of a generator given as an
	// object), so it fails the build only when kustomize fails on it (see unnamedUnreadable);
	// last is the file read last.
	bad     *[]badFile
	data    map[string]bool
	unnamed *[]badFile
	last    *string
}

// badFile is a file render would refuse to read, by the absolute path kustomize read it at, and
// why.
type badFile struct {
	path string
	err  error
}

// unreadable is the files named as YAML that render would refuse to read.
func (f selfFS) unreadable() []badFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(*f.bad)
}

// unnamedUnreadable is what made kustomize fail with err, when it is a file render would refuse
// to read and that is not named as YAML; or nil. kustomize stops at the first problem: the file it
// read last, if render refuses it (a patch kustomize cannot parse, naming no line); or, when
// kustomize's error is a YAML error (it reads the configs of every transformer before it parses
// any), the files render refuses.
func (f selfFS) unnamedUnreadable(err error) []badFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	var bad []badFile
	for _, u := range *f.unnamed {
		if u.path == *f.last {
			bad = []badFile{u}
			break
		}
		if strings.Contains(err.Error(), "yaml: ") {
			bad = append(bad, u)
		}
	}
	return bad
}

// check checks a file read as YAML, the original bytes of a replaced one included, and records
// what is wrong with it; the error is returned to kustomize, which stops.
func (f selfFS) check(path string, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.last = path
	if f.data[abs(path)] {
		return nil
	}
	if !isYAMLFile(path) {
		if err := checkYAML(b); err != nil {
			*f.unnamed = append(*f.unnamed, badFile{path, err})
		}
		return nil
	}
	if err := checkYAML(b); err != nil {
		*f.bad = append(*f.bad, badFile{path, err})
		return fmt.Errorf("%s: %w", path, err)
	}
	if slices.Contains(KustomizationFileNames, filepath.Base(path)) {
		var k map[string]any
		if yaml.Unmarshal(b, &k) == nil {
			for _, g := range generatorFiles(path, k) {
				f.data[g] = true
			}
		}
	}
	return nil
}

type source struct {
	path string
	data []byte
}

func newSelfFS(fn function, e *elider) selfFS {
	return selfFS{FileSystem: filesys.MakeFsOnDisk(), fn: fn, elide: e, mu: &sync.Mutex{}, read: &[]source{}, ours: new(bool),
		bad: &[]badFile{}, data: map[string]bool{}, unnamed: &[]badFile{}, last: new(string)}
}

func (f selfFS) ReadFile(path string) ([]byte, error) {
	b, err := f.FileSystem.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := f.check(path, b); err != nil {
		return nil, err
	}
	if r, ok := f.replace[abs(path)]; ok {
		b = r
	}
	f.mu.Lock()
	*f.read = append(*f.read, source{abs(path), b})
	f.mu.Unlock()
	if !bytes.Contains(b, []byte(renderconfig.Kind)) || !bytes.Contains(b, []byte(renderconfig.APIVersion)) {
		if f.elide != nil {
			b = f.elide.file(path, b)
		}
		return b, nil
	}
	out, changed, err := rewriteExecPath(b, f.fn)
	if changed {
		f.mu.Lock()
		*f.ours = true
		f.mu.Unlock()
	}
	return out, err
}

func (f selfFS) sources() []source {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]source(nil), *f.read...)
}

func (f selfFS) paths() []string {
	var out []string
	for _, s := range f.sources() {
		out = append(out, s.path)
	}
	return out
}

func (f selfFS) renders() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.ours
}

// rewriteExecPath points the exec function of the SandboxRender configs in b at fn: its path, and
// arguments that make it write its results for the build (ResultsDirFlag). Our function takes no
// arguments, so none are lost.
func rewriteExecPath(b []byte, fn function) ([]byte, bool, error) {
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
	// Not ours to judge; kustomize will report it. A node that is not a mapping is no object
	// kustomize takes, and kyaml's accessors (isMapping), kio.ByteWriter's too, panic on one.
	if err != nil || slices.ContainsFunc(nodes, func(n *kyaml.RNode) bool { return !isMapping(n) }) {
		return b, false, nil
	}
	changed := false
	for _, n := range nodes {
		if n.GetApiVersion() != renderconfig.APIVersion || n.GetKind() != renderconfig.Kind {
			continue
		}
		annotation := annotationsOf(n)[functionAnnotation]
		var spec struct {
			Exec map[string]any `json:"exec,omitempty"`
		}
		if annotation == "" || yaml.Unmarshal([]byte(annotation), &spec) != nil || spec.Exec == nil {
			continue
		}
		spec.Exec["path"] = fn.path
		if fn.results != "" {
			spec.Exec["args"] = []string{"fn", "--" + ResultsDirFlag + "=" + fn.results}
		}
		out, err := yaml.Marshal(spec)
		if err != nil {
			return nil, false, err
		}
		if _, err := n.Pipe(kyaml.SetAnnotation(functionAnnotation, string(out))); err != nil {
			return nil, false, err
		}
		changed = true
	}
	if !changed {
		return b, false, nil
	}
	var buf bytes.Buffer
	if err := (kio.ByteWriter{Writer: &buf}).Write(nodes); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), true, nil
}

// AgentSandboxObjects counts the agent-sandbox custom resources and the SandboxRender function
// configs in a build's output, for the checks that a build rendered something. A config is one
// that still says how to run the function (config.kubernetes.io/function): a functionConfig
// listed as a resource. The copies the render writes for the cluster carry no such annotation.
func (r *Result) AgentSandboxObjects() (crs, configs int) {
	for _, o := range r.Objects {
		gvk := o.ID.Gvk
		switch {
		case gvk.Kind == renderconfig.Kind && gvk.Group+"/"+gvk.Version == renderconfig.APIVersion:
			if _, isConfig := o.annotations()[functionAnnotation]; isConfig {
				configs++
			}
		case gvk.Group == "agents.x-k8s.io" || gvk.Group == "extensions.agents.x-k8s.io":
			crs++
		}
	}
	return crs, configs
}

// annotations are the object's annotations, whichever form holds it.
func (o Object) annotations() map[string]string {
	if o.res != nil {
		return o.res.GetAnnotations()
	}
	md, _ := o.obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	out := make(map[string]string, len(ann))
	for k, v := range ann {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
