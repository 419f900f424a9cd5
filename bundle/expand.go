// Package bundle is the whole declarative render of a set of manifests, shared by the CLI, the
// KRM function and the golden tests: decode the agent-sandbox objects, render their children, and
// return the input plus the children in canonical order. It is pure.
package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
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
	entries, err := ExpandEntries(objs, opts, false)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(entries))
	for i, e := range entries {
		out[i] = e.Object
		if e.Input >= 0 {
			out[i] = objs[e.Input]
		}
	}
	return out, nil
}

// Entry is one object of an expansion: an input object passed through (Input, its index in the
// objects given) or a rendered child (Input is -1, and Object or YAML is set).
type Entry struct {
	Input  int
	Object *unstructured.Unstructured
	// YAML is the child as manifest.EncodeObject writes it, when the expansion was asked to encode.
	YAML []byte
}

// ExpandEntries is Expand telling the inputs passed through from the children. With encode, each
// child comes as its YAML, encoded as the render makes it (render.RenderEach), and its typed and
// unstructured forms are let go at once: a caller that writes the result (the KRM function) then
// never holds tens of thousands of children typed, unstructured and encoded. The order, the
// checks and the errors are Expand's.
func ExpandEntries(objs []*unstructured.Unstructured, opts render.Options, encode bool) ([]Entry, error) {
	// An object given twice is reported on each later copy, where it is written (findings found
	// the copy by name, so every duplicate was placed at the first), before the render could
	// report a claim given twice as its Sandbox "rendered twice".
	seen := make(map[string]bool, len(objs))
	var dups []error
	for _, o := range objs {
		if id := identity(o); seen[id] {
			dups = append(dups, duplicate(o))
		} else {
			seen[id] = true
		}
	}
	b, err := manifest.Decode(objs)
	if err != nil || len(dups) > 0 {
		return nil, errors.Join(append(dups, err)...)
	}
	// Each child is turned into an unstructured object (and, with encode, YAML) a batch at a time
	// as the render makes it, on every core, and its typed form let go.
	type child struct {
		key   manifest.CanonicalKey
		group string
		obj   *unstructured.Unstructured
		yaml  []byte
		err   error
	}
	var children []render.Child // with their objects let go
	var made []child
	var batch []render.Child
	convert := func() {
		start := len(made)
		made = append(made, make([]child, len(batch))...)
		parallel.Each(len(batch), func(i int) {
			c := &made[start+i]
			u, err := toUnstructured(batch[i].Object)
			if err != nil {
				c.err = err
				return
			}
			c.key, c.group = manifest.KeyOf(u), u.GroupVersionKind().Group
			if encode {
				// Held until written: a copy of its size, not the buffer it grew in.
				var y []byte
				y, c.err = manifest.EncodeObject(u.Object)
				c.yaml = bytes.Clone(y)
			} else {
				c.obj = u
			}
		})
		for _, c := range batch {
			c.Object = nil
			children = append(children, c)
		}
		clear(batch)
		batch = batch[:0]
	}
	err = render.RenderEach(b.Input(), opts, func(c render.Child) {
		if batch = append(batch, c); len(batch) == convertBatch {
			convert()
		}
	})
	if err != nil {
		b.FieldsAsWritten(err)
		return nil, err
	}
	convert()
	// A preview at a moment (opts.Now) leaves out Sandboxes a controller will have deleted.
	gone := map[string]bool{}
	for _, sb := range b.Input().Sandboxes {
		if _, deleted := render.Expiring(sb, opts); deleted {
			gone[sb.Namespace+"/"+sb.Name] = true
		}
	}
	convErrs := make([]error, len(made))
	for i, m := range made {
		convErrs[i] = m.err
	}
	if err := errors.Join(convErrs...); err != nil {
		return nil, err
	}

	rendered := make(map[string]render.Child, len(children))
	out := make([]Entry, 0, len(objs)+len(children))
	keys := make([]manifest.CanonicalKey, 0, len(objs)+len(children))
	var errs []error
	var sources map[string]*unstructured.Unstructured // the agent-sandbox inputs, when two parents collide
	for i, c := range children {
		m := made[i]
		id := m.group + "/" + m.key.Kind + "/" + m.key.Namespace + "/" + m.key.Name
		if prev, dup := rendered[id]; dup {
			if sources == nil {
				sources = make(map[string]*unstructured.Unstructured)
				for _, o := range objs {
					if manifest.IsAgentSandbox(o) {
						sources[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
					}
				}
			}
			errs = append(errs, renderedTwice(m.key, prev, c, sources))
			continue
		}
		rendered[id] = c
		out = append(out, Entry{Input: -1, Object: m.obj, YAML: m.yaml})
		keys = append(keys, m.key)
	}

	for i, o := range objs {
		if o.GroupVersionKind().Group == "agents.x-k8s.io" && o.GetKind() == "Sandbox" && gone[o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		id := identity(o)
		child, ok := rendered[id]
		if !ok {
			out = append(out, Entry{Input: i})
			keys = append(keys, manifest.KeyOf(o))
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
	manifest.SortByKeys(out, keys)
	return out, nil
}

// convertBatch is how many children are converted at once: enough to keep every core busy, few
// enough that their typed forms are let go soon.
const convertBatch = 1024

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

// renderedTwice is the finding on a child two parents render (Sandboxes b-c and c both render
// PersistentVolumeClaim a-b-c, from volume claim templates a and a-b): it is placed on the
// field of the later parent's source that names the child, and names the earlier parent. The
// message was "PersistentVolumeClaim a-b-c is rendered twice: from Sandbox b-c and from Sandbox
// c", with no file, document or field, and for a Sandbox a claim made, an object written nowhere.
func renderedTwice(key manifest.CanonicalKey, prev, c render.Child, sources map[string]*unstructured.Unstructured) *render.InvalidError {
	src := c.Source
	what := "renders " + describe(key)
	if c.Parent != src.Object() {
		what = "its " + c.Parent + " " + what // a Sandbox the claim or pool makes
	}
	other := prev.Parent
	switch {
	case prev.Source.Object() == src.Object():
		other = "its " + other // another Sandbox the same pool makes
	case prev.Parent != prev.Source.Object():
		other += " (from " + prev.Source.Object() + ")"
	}
	return &render.InvalidError{Kind: src.Kind, Namespace: src.Namespace, Name: src.Name,
		Source: sources[src.Kind+"/"+src.Namespace+"/"+src.Name],
		Errs: field.ErrorList{field.Invalid(src.Field, src.Value,
			fmt.Sprintf("%s, which %s renders too; rename one of them", what, other))}}
}

// duplicate is the finding on a later copy of an object given twice.
func duplicate(o *unstructured.Unstructured) *render.InvalidError {
	return &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Source: o,
		Errs: field.ErrorList{field.Duplicate(field.NewPath("metadata", "name"), o.GetName())}}
}

func identity(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

func describe(k manifest.CanonicalKey) string {
	if k.Namespace == "" {
		return k.Kind + " " + quote.Name(k.Name)
	}
	return k.Kind + " " + quote.Name(k.Namespace) + "/" + quote.Name(k.Name)
}
