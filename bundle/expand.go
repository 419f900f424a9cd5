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
	x, err := ExpandEntries(objs, opts, false)
	if err != nil {
		return nil, err
	}
	return x.Objects(objs), nil
}

// Expansion is what one expansion of objs gives: its entries in order, and the render's
// warnings. The warnings are read from the objects as they were decoded for the render, so that
// a caller reporting both (the CLI, the function) does not decode every object a second time.
type Expansion struct {
	Entries []Entry
	// Warnings are the findings that do not stop the render, sorted (see warnings).
	Warnings []Warning
}

// Objects are the entries as objects: an input passed through as the object of objs it is (objs
// must be what the expansion was given), a child as its unstructured object (nil when the
// expansion encoded it).
func (x *Expansion) Objects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(x.Entries))
	for i, e := range x.Entries {
		out[i] = e.Object
		if e.Input >= 0 {
			out[i] = objs[e.Input]
		}
	}
	return out
}

// Entry is one object of an expansion: an input object passed through (Input, its index in the
// objects given) or a rendered child (Input is -1, and Object or YAML is set).
type Entry struct {
	Input  int
	Object *unstructured.Unstructured
	// YAML is the child as manifest.EncodeObject writes it, when the expansion was asked to encode.
	YAML []byte
}

// ExpandEntries is Expand telling the inputs passed through from the children, with the
// render's warnings. With encode, each child comes as its YAML, encoded as the render makes it
// (render.RenderEach), and its typed and unstructured forms are let go at once: a caller that
// writes the result (the KRM function) then never holds tens of thousands of children typed,
// unstructured and encoded. The order, the checks and the errors are Expand's.
func ExpandEntries(objs []*unstructured.Unstructured, opts render.Options, encode bool) (*Expansion, error) {
	b, err := decodeOnce(objs)
	if err != nil {
		return nil, err
	}
	// Read before the render, from the objects as decoded: what the warnings say must not
	// depend on what rendering does with the typed objects.
	ws := warnings(b, opts)
	children, made, err := renderChildren(b, opts, encode)
	if err != nil {
		return nil, err
	}
	x := &expansion{
		rendered: make(map[string]render.Child, len(children)),
		out:      make([]Entry, 0, len(objs)+len(children)),
		keys:     make([]manifest.CanonicalKey, 0, len(objs)+len(children)),
	}
	x.addChildren(children, made, objs)
	x.addInputs(objs, deletedSandboxes(b, opts))
	if len(x.errs) > 0 {
		slices.SortFunc(x.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(x.errs...)
	}
	manifest.SortByKeys(x.out, x.keys)
	return &Expansion{Entries: x.out, Warnings: ws}, nil
}

// decodeOnce decodes objs, refusing an object given twice. The finding is on each later copy,
// where it is written (findings found the copy by name, so every duplicate was placed at the
// first), and comes before the render could report a claim given twice as its Sandbox "rendered
// twice".
func decodeOnce(objs []*unstructured.Unstructured) (*manifest.Bundle, error) {
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
	return b, nil
}

// renderChildren renders the bundle and converts its children as they are made (childConverter):
// the children with their typed objects let go, and what each was converted to, in the same
// order. A render error is placed on the fields as written (Bundle.FieldsAsWritten).
func renderChildren(b *manifest.Bundle, opts render.Options, encode bool) ([]render.Child, []converted, error) {
	cv := &childConverter{encode: encode}
	if err := render.RenderEach(b.Input(), opts, cv.add); err != nil {
		b.FieldsAsWritten(err)
		return nil, nil, err
	}
	cv.flush()
	errs := make([]error, len(cv.made))
	for i, m := range cv.made {
		errs[i] = m.err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return cv.children, cv.made, nil
}

// converted is a rendered child as the expansion keeps it: its sort key and group, and its
// unstructured object or, when encoding, its YAML.
type converted struct {
	key   manifest.CanonicalKey
	group string
	obj   *unstructured.Unstructured
	yaml  []byte
	err   error
}

// childConverter turns each child into an unstructured object (and, with encode, YAML) a batch at
// a time as the render makes it, on every core, and lets its typed form go, so that a large
// render never holds all its children typed.
type childConverter struct {
	encode   bool
	children []render.Child // with their objects let go
	made     []converted
	batch    []render.Child
}

// add is the render's callback: it takes one child, converting a batch once it is full.
func (cv *childConverter) add(c render.Child) {
	if cv.batch = append(cv.batch, c); len(cv.batch) == convertBatch {
		cv.flush()
	}
}

// flush converts the children batched so far.
func (cv *childConverter) flush() {
	start := len(cv.made)
	cv.made = append(cv.made, make([]converted, len(cv.batch))...)
	parallel.Each(len(cv.batch), func(i int) {
		c := &cv.made[start+i]
		u, err := toUnstructured(cv.batch[i].Object)
		if err != nil {
			c.err = err
			return
		}
		c.key, c.group = manifest.KeyOf(u), u.GroupVersionKind().Group
		if cv.encode {
			// Held until written: a copy of its size, not the buffer it grew in.
			var y []byte
			y, c.err = manifest.EncodeObject(u.Object)
			c.yaml = bytes.Clone(y)
		} else {
			c.obj = u
		}
	})
	for _, c := range cv.batch {
		c.Object = nil
		cv.children = append(cv.children, c)
	}
	clear(cv.batch)
	cv.batch = cv.batch[:0]
}

// deletedSandboxes are the Sandboxes a controller will have deleted at the moment of the preview
// (opts.Now), by namespace/name: the expansion leaves them out.
func deletedSandboxes(b *manifest.Bundle, opts render.Options) map[string]bool {
	gone := map[string]bool{}
	for _, sb := range b.Input().Sandboxes {
		if _, deleted := render.Expiring(sb, opts); deleted {
			gone[sb.Namespace+"/"+sb.Name] = true
		}
	}
	return gone
}

// expansion is the output being assembled: its entries with their sort keys, the children
// rendered by identity, and the findings.
type expansion struct {
	rendered map[string]render.Child
	out      []Entry
	keys     []manifest.CanonicalKey
	errs     []error
}

// addChildren adds the rendered children. A child two parents render is a finding on the later
// one (renderedTwice), which names the source objs hold.
func (x *expansion) addChildren(children []render.Child, made []converted, objs []*unstructured.Unstructured) {
	var sources map[string]*unstructured.Unstructured // the agent-sandbox inputs, when two parents collide
	for i, c := range children {
		m := made[i]
		id := m.group + "/" + m.key.Kind + "/" + m.key.Namespace + "/" + m.key.Name
		if prev, dup := x.rendered[id]; dup {
			if sources == nil {
				sources = make(map[string]*unstructured.Unstructured)
				for _, o := range objs {
					if manifest.IsAgentSandbox(o) {
						sources[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
					}
				}
			}
			x.errs = append(x.errs, renderedTwice(m.key, prev, c, sources))
			continue
		}
		x.rendered[id] = c
		x.out = append(x.out, Entry{Input: -1, Object: m.obj, YAML: m.yaml})
		x.keys = append(x.keys, m.key)
	}
}

// addInputs passes the inputs through, but for the Sandboxes gone by the preview's moment and
// the earlier renders of a child, which the fresh child replaces. An input with a child's
// identity but not its marker belongs to someone else: a finding, as upstream refuses to adopt
// it.
func (x *expansion) addInputs(objs []*unstructured.Unstructured, gone map[string]bool) {
	for i, o := range objs {
		if o.GroupVersionKind().Group == "agents.x-k8s.io" && o.GetKind() == "Sandbox" && gone[o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		child, ok := x.rendered[identity(o)]
		if !ok {
			x.out = append(x.out, Entry{Input: i})
			x.keys = append(x.keys, manifest.KeyOf(o))
			continue
		}
		if got, _, _ := unstructured.NestedString(o.Object, child.MarkerPath...); got != child.MarkerValue {
			x.errs = append(x.errs, &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
				Errs: field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), fmt.Sprintf(
					"an object of this name is rendered from %s; remove this one, or set %s to %q if it is an earlier render of that object",
					child.Parent, strings.Join(child.MarkerPath, "."), child.MarkerValue))}})
		}
		// An earlier render of the child: replaced by the fresh one.
	}
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
