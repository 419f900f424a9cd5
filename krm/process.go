package krm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// originAnnotation is where kustomize records the file an object came from when the
// kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// Processor is the function as a kyaml framework.ResourceListProcessor.
var Processor = framework.ResourceListProcessorFunc(Process)

// Process runs the function on a ResourceList. Items it does not own are passed through as the
// very nodes it was given. Problems become results (severity, resource, field, file); if any is an
// error, Process returns the results as its error (a non-zero exit) with the items still set: the
// input items unchanged, nothing half-rendered.
func Process(rl *framework.ResourceList) error {
	var cfgData []byte
	if rl.FunctionConfig != nil {
		s, err := rl.FunctionConfig.String()
		if err != nil {
			return err
		}
		cfgData = []byte(s)
	}
	cfg, err := ParseConfig(cfgData)
	if err != nil {
		rl.Results = append(rl.Results, &framework.Result{Message: err.Error(), Severity: framework.Error})
		return rl.Results
	}

	items := rl.Items
	for i, r := range cfg.Spec.Resources {
		n, err := kyaml.FromMap(r)
		if err != nil {
			return fmt.Errorf("functionConfig spec.resources[%d]: %w", i, err)
		}
		items = append(items, n)
	}
	objs := make([]*unstructured.Unstructured, len(items))
	nodes := make(map[*unstructured.Unstructured]*kyaml.RNode, len(items))
	for i, n := range items {
		u, err := toUnstructured(n)
		if err != nil {
			rl.Results = append(rl.Results, &framework.Result{Message: fmt.Sprintf("item %d: %v", i, err), Severity: framework.Error, File: fileOf(n)})
			return rl.Results
		}
		objs[i] = u
		nodes[u] = n
	}

	out, err := bundle.Expand(objs, cfg.Options())
	if err != nil {
		rl.Results = append(rl.Results, Results(err, objs, func(u *unstructured.Unstructured) *framework.File { return fileOf(nodes[u]) })...)
		rl.Items = items
		return rl.Results
	}
	if cfg.Spec.Mode == ModeValidate {
		rl.Results = append(rl.Results, &framework.Result{Severity: framework.Info,
			Message: fmt.Sprintf("%d objects checked; the agent-sandbox ones render without error", len(objs))})
		return nil
	}
	result := make([]*kyaml.RNode, 0, len(out))
	for _, u := range out {
		if n, given := nodes[u]; given {
			if !*cfg.Spec.KeepSources && manifest.IsAgentSandbox(u) {
				continue
			}
			result = append(result, n)
			continue
		}
		n, err := kyaml.FromMap(u.Object)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		result = append(result, n)
	}
	rl.Items = result
	return nil
}

func toUnstructured(n *kyaml.RNode) (*unstructured.Unstructured, error) {
	s, err := n.String()
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
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
