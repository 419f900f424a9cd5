package krm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
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
	out, err := process(rl)
	if err != nil {
		return err
	}
	items := make([]*kyaml.RNode, len(out))
	for i, it := range out {
		if it.node != nil {
			items[i] = it.node
			continue
		}
		if items[i], err = kyaml.FromMap(it.obj.Object); err != nil {
			return fmt.Errorf("encoding %s %s: %w", it.obj.GetKind(), it.obj.GetName(), err)
		}
	}
	rl.Items = items
	if rl.Results.ExitCode() != 0 {
		return rl.Results
	}
	return nil
}

// process computes the output items and sets rl.Results. On findings the output is the input,
// unchanged.
func process(rl *framework.ResourceList) ([]item, error) {
	var cfgData []byte
	if rl.FunctionConfig != nil {
		s, err := rl.FunctionConfig.String()
		if err != nil {
			return nil, err
		}
		cfgData = []byte(s)
	}
	unchanged := func(nodes []*kyaml.RNode) []item {
		out := make([]item, len(nodes))
		for i, n := range nodes {
			out[i] = item{node: n}
		}
		return out
	}
	cfg, err := ParseConfig(cfgData)
	if err != nil {
		rl.Results = append(rl.Results, &framework.Result{Message: err.Error(), Severity: framework.Error})
		return unchanged(rl.Items), nil
	}

	nodes := rl.Items
	for i, r := range cfg.Spec.Resources {
		n, err := kyaml.FromMap(r)
		if err != nil {
			return nil, fmt.Errorf("functionConfig spec.resources[%d]: %w", i, err)
		}
		nodes = append(nodes, n)
	}
	objs := make([]*unstructured.Unstructured, len(nodes))
	errs := make([]error, len(nodes))
	parallel.Each(len(nodes), func(i int) { objs[i], errs[i] = toUnstructured(nodes[i]) })
	byObj := make(map[*unstructured.Unstructured]*kyaml.RNode, len(nodes))
	for i, n := range nodes {
		if errs[i] != nil {
			rl.Results = append(rl.Results, &framework.Result{Message: fmt.Sprintf("item %d: %v", i, errs[i]), Severity: framework.Error, File: fileOf(n)})
			return unchanged(rl.Items), nil
		}
		byObj[objs[i]] = n
	}

	rendered, err := bundle.Expand(objs, cfg.Options())
	if err != nil {
		rl.Results = append(rl.Results, Results(err, objs, func(u *unstructured.Unstructured) *framework.File { return fileOf(byObj[u]) })...)
		return unchanged(rl.Items), nil
	}
	if *cfg.Spec.KeepSources && !cfg.Spec.KeepSourceVersions {
		// v1alpha1 sources come out as v1beta1; other items stay the nodes they were.
		converted, err := bundle.ConvertSources(rendered)
		if err != nil {
			rl.Results = append(rl.Results, Results(err, objs, func(u *unstructured.Unstructured) *framework.File { return fileOf(byObj[u]) })...)
			return unchanged(rl.Items), nil
		}
		rendered = converted
	}
	if cfg.Spec.Mode == ModeValidate {
		rl.Results = append(rl.Results, &framework.Result{Severity: framework.Info,
			Message: fmt.Sprintf("%d objects checked; the agent-sandbox ones render without error", len(objs))})
		return unchanged(rl.Items), nil
	}
	out := make([]item, 0, len(rendered))
	for _, u := range rendered {
		n, given := byObj[u]
		switch {
		case !given:
			out = append(out, item{obj: u})
		case !*cfg.Spec.KeepSources && manifest.IsAgentSandbox(u):
		default:
			out = append(out, item{node: n})
		}
	}
	return out, nil
}

func toUnstructured(n *kyaml.RNode) (*unstructured.Unstructured, error) {
	m, err := n.Map()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: jsonTypes(m).(map[string]any)}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, errors.New("every item needs apiVersion and kind")
	}
	return u, nil
}

// Results turns a render error into KRM results: one per field error of each invalid object,
// naming the object, the field path and, when fileOf knows it, the file; other errors as plain
// results.
func Results(err error, objs []*unstructured.Unstructured, fileOf func(*unstructured.Unstructured) *framework.File) framework.Results {
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
		src := find(objs, ie)
		ref := &kyaml.ResourceIdentifier{
			TypeMeta: kyaml.TypeMeta{Kind: ie.Kind},
			NameMeta: kyaml.NameMeta{Name: ie.Name, Namespace: ie.Namespace},
		}
		var file *framework.File
		if src != nil {
			ref.APIVersion = src.GetAPIVersion()
			file = fileOf(src)
		}
		for _, fe := range ie.Errs {
			r := &framework.Result{
				Message:     ie.Object() + ": " + fe.Error(),
				Severity:    framework.Error,
				ResourceRef: ref,
				Field:       &framework.Field{Path: fe.Field},
				File:        file,
			}
			if fe.BadValue != nil && fe.Type != field.ErrorTypeRequired && fe.Type != field.ErrorTypeForbidden {
				r.Field.CurrentValue = fe.BadValue
			}
			out = append(out, r)
		}
	}
	walk(err)
	return out
}

func find(objs []*unstructured.Unstructured, ie *render.InvalidError) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == ie.Kind && o.GetNamespace() == ie.Namespace && o.GetName() == ie.Name {
			return o
		}
	}
	return nil
}

// fileOf is the file an item came from: kyaml's path and index annotations, or kustomize's origin
// annotation (buildMetadata: [originAnnotations]).
func fileOf(n *kyaml.RNode) *framework.File {
	if n == nil {
		return nil
	}
	path, index, _ := kioutil.GetFileAnnotations(n)
	if path == "" {
		// kustomize's index annotation counts items of the whole list, not documents of the file.
		index = ""
		origin := n.GetAnnotations()[originAnnotation]
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

// Format writes results for people: one line each, led by the file and document index when
// known.
func Format(results framework.Results) string {
	var b strings.Builder
	for _, r := range results {
		switch {
		case r.File == nil || r.File.Path == "":
		case r.File.Index > 0:
			fmt.Fprintf(&b, "%s[%d]: ", r.File.Path, r.File.Index)
		default:
			fmt.Fprintf(&b, "%s: ", r.File.Path)
		}
		fmt.Fprintf(&b, "%s: %s\n", r.Severity, r.Message)
	}
	return b.String()
}

// jsonTypes turns YAML-decoded values into the types of decoded JSON that unstructured objects
// hold: integers as int64, maps keyed by string.
func jsonTypes(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonTypes(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonTypes(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonTypes(e)
		}
		return t
	case int:
		return int64(t)
	case int32:
		return int64(t)
	case uint64:
		return int64(t)
	case float32:
		return float64(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	default:
		return v
	}
}
