// Package bundle is the whole declarative render of a set of manifests, shared by the CLI, the
// KRM function and the golden tests: decode the agent-sandbox objects, render their children, and
// return the input plus the children in canonical order. It is pure.
package bundle

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Expand renders objs and returns them with their children, sorted by kind, namespace and name.
//
// It is idempotent: an input object that has the identity of a rendered child and carries that
// child's sandbox-name-hash label is taken to be an earlier render of it and is replaced, so
// expanding the output again gives the same bytes. An input object with that identity but without
// the label belongs to someone else, and Expand refuses to overwrite it, as upstream refuses to
// adopt it. Objects that are not agent-sandbox kinds pass through untouched.
func Expand(objs []*unstructured.Unstructured, opts render.Options) ([]*unstructured.Unstructured, error) {
	b, err := manifest.Decode(objs)
	if err != nil {
		return nil, err
	}
	children, err := render.Render(b.Input(), opts)
	if err != nil {
		b.FieldsAsWritten(err)
		return nil, err
	}

	rendered := make(map[string]render.Child, len(children))
	out := make([]*unstructured.Unstructured, 0, len(objs)+len(children))
	var errs []error
	converted := make([]*unstructured.Unstructured, len(children))
	convErrs := make([]error, len(children))
	parallel.Each(len(children), func(i int) { converted[i], convErrs[i] = toUnstructured(children[i].Object) })
	if err := errors.Join(convErrs...); err != nil {
		return nil, err
	}
	for i, c := range children {
		u := converted[i]
		id := identity(u)
		if prev, dup := rendered[id]; dup {
			errs = append(errs, fmt.Errorf("%s is rendered twice: from %s and from %s; rename one of them",
				describe(u), prev.Parent, c.Parent))
			continue
		}
		rendered[id] = c
		out = append(out, u)
	}

	// A preview at a moment (opts.Now) leaves out Sandboxes a controller will have deleted.
	gone := map[string]bool{}
	for _, sb := range b.Input().Sandboxes {
		if _, deleted := render.Expiring(sb, opts); deleted {
			gone[sb.Namespace+"/"+sb.Name] = true
		}
	}
	seen := make(map[string]bool, len(objs))
	for _, o := range objs {
		if o.GroupVersionKind().Group == "agents.x-k8s.io" && o.GetKind() == "Sandbox" && gone[o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		id := identity(o)
		if seen[id] {
			errs = append(errs, &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
				Errs: field.ErrorList{field.Duplicate(field.NewPath("metadata", "name"), o.GetName())}})
			continue
		}
		seen[id] = true
		child, ok := rendered[id]
		if !ok {
			out = append(out, o)
			continue
		}
		if got, _, _ := unstructured.NestedString(o.Object, child.MarkerPath...); got != child.MarkerValue {
			errs = append(errs, &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
				Errs: field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), fmt.Sprintf(
					"an object of this name is rendered from %s; remove this one, or set %s to %q if it is an earlier render of that object",
					child.Parent, strings.Join(child.MarkerPath, "."), child.MarkerValue))}})
		}
		// An earlier render of the child: replaced by the fresh one.
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	manifest.SortCanonical(out)
	return out, nil
}

// toUnstructured converts a typed child. A rendered child is desired state: it has no status
// (Go's zero values would otherwise put status: {} or status.loadBalancer: {} into every
// manifest) and no creation timestamp.
func toUnstructured(obj render.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		if v, present := md["creationTimestamp"]; present && v == nil {
			delete(md, "creationTimestamp")
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func identity(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}
