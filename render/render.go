package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
)

// Object is a rendered child: a typed Kubernetes object with its TypeMeta set.
type Object interface {
	metav1.Object
	runtime.Object
}

// Child is a rendered object, the object it was rendered from, and how to recognise an earlier
// render of it among input objects (so rendering the output again replaces it instead of
// colliding with it).
type Child struct {
	Object
	// Parent is the object it is rendered from, as "Kind namespace/name": a Sandbox, or the
	// template of a NetworkPolicy, or the claim or pool of a Sandbox.
	Parent string
	// Source is the input object and field a finding about the child is placed on; every
	// child the render emits has one.
	Source Source
	// MarkerPath and MarkerValue: an input object with the child's identity is an earlier render
	// of it when the string at MarkerPath equals MarkerValue.
	MarkerPath  []string
	MarkerValue string
}

// Source is the input object a child comes from and the field of it that names the child, so
// that a finding about the child (two parents rendering it) names a file, a document and a field.
// It is the Sandbox and its metadata.name, or for a PVC its volume claim template's
// metadata.name; a template and its metadata.name for the template's NetworkPolicy; and for a
// Sandbox made from a claim or pool, and for that Sandbox's children, the claim or pool and its
// metadata.name, since the made Sandbox is written in no file.
type Source struct {
	Kind, Namespace, Name string
	// Field names the child; Value is what it holds.
	Field *field.Path
	Value string
}

// Object names the source the way kubectl does: Kind namespace/name.
func (s Source) Object() string {
	return describe(s.Kind, s.Namespace, s.Name)
}

// sourceOf is an input object as a source, the child named by its metadata.name.
func sourceOf(kind string, obj metav1.Object) Source {
	return Source{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Field: field.NewPath("metadata", "name"), Value: obj.GetName()}
}

// Input is every defaulted v1beta1 object a render sees.
type Input struct {
	Sandboxes []*agentsv1beta1.Sandbox
	Templates []*extv1beta1.SandboxTemplate
	Claims    []*extv1beta1.SandboxClaim
	Pools     []*extv1beta1.SandboxWarmPool
}

// Render computes every object a declarative render emits: each template's NetworkPolicy, each
// pool's member Sandboxes, each claim's Sandbox (the cold path), and for every Sandbox, given or
// made, its Pod, PVCs, Service and (with the standalone-network-policy pack) NetworkPolicy. All
// invalid objects are reported together (InvalidErrors joined with errors.Join) and no children
// are returned then: a render either succeeds whole or writes nothing.
func Render(in *Input, opts Options) ([]Child, error) {
	var out []Child
	if err := RenderEach(in, opts, func(c Child) { out = append(out, c) }); err != nil {
		return nil, err
	}
	return out, nil
}

// RenderEach is Render handing each child to emit as soon as it is made, in Render's order, so a
// caller that turns children into something else (the KRM function encodes them) never holds
// them all at once. On an error, children may have been emitted before it was found: the caller
// discards them, as Render returns none.
func RenderEach(in *Input, opts Options, emit func(Child)) error {
	if errs := opts.Policies.Validate(field.NewPath("policies")); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("invalid render options: %s", strings.Join(msgs, "; "))
	}
	r := &renderer{opts: opts, emit: emit, made: map[string]madeSandbox{}}
	// Work in name order so that errors, and which of two colliding objects is reported first, do
	// not depend on input order.
	for _, t := range sortedByName(in.Templates) {
		r.template(t)
	}
	// Checked before any pool renders a member: the sum is known from the specs alone. A pool
	// over its own limit is reported on its spec.replicas instead, and renders nothing.
	// It is reported on the spec.replicas of the pool (in name order) that crosses the limit, so
	// the finding names a file, a document and a field.
	var members int64
	var over *extv1beta1.SandboxWarmPool
	limit := opts.maxPoolMembers()
	for _, p := range sortedByName(in.Pools) {
		if n := replicas(p); n <= opts.maxPoolReplicas() {
			members += int64(n)
			if members > limit && over == nil {
				over = p
			}
		}
	}
	if over != nil {
		return &InvalidError{Kind: extv1beta1.SandboxWarmPoolKind, Namespace: over.Namespace, Name: over.Name,
			Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), replicas(over), fmt.Sprintf(
				"the SandboxWarmPools of this input ask for %d members in all, more than the limit of %d per render; render them in parts, or raise the limit (SandboxRender spec.maxPoolMembers)", members, limit))}}
	}
	for _, p := range sortedByName(in.Pools) {
		r.pool(p, in.Templates)
	}
	for _, c := range sortedByName(in.Claims) {
		r.claim(c, in)
	}
	for _, sb := range sortedByName(in.Sandboxes) {
		r.handWritten(sb)
	}
	return errors.Join(r.errs...)
}

type renderer struct {
	opts Options
	emit func(Child)
	errs []error
	// made are the Sandboxes rendered from claims and pools, by namespace/name: what they were
	// made from and their marker, not the objects, which RenderEach lets go once emitted.
	made map[string]madeSandbox
}

func (r *renderer) invalid(kind string, obj metav1.Object, errs ...*field.Error) {
	r.errs = append(r.errs, &InvalidError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Errs: errs})
}

func (r *renderer) template(t *extv1beta1.SandboxTemplate) {
	if errs := validateTemplate(t, r.opts); len(errs) > 0 {
		r.invalid(extv1beta1.SandboxTemplateKind, t, errs...)
		return
	}
	if np := TemplateNetworkPolicy(t, r.opts); np != nil {
		r.emit(Child{Object: np, Parent: describe(extv1beta1.SandboxTemplateKind, t.Namespace, t.Name),
			Source:      sourceOf(extv1beta1.SandboxTemplateKind, t),
			MarkerPath:  []string{"spec", "podSelector", "matchLabels", agentsv1beta1.SandboxTemplateRefHashLabel},
			MarkerValue: NameHash(t.Name)})
	}
}

func (r *renderer) pool(p *extv1beta1.SandboxWarmPool, templates []*extv1beta1.SandboxTemplate) {
	// The limit is checked first: nothing is allocated for a pool of 2^31-1 members.
	var errs field.ErrorList
	if n, limit := replicas(p), r.opts.maxPoolReplicas(); n > limit {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), n,
			fmt.Sprintf("more than %d members in one pool; split the pool, or raise the limit (SandboxRender spec.maxPoolReplicas)", limit)))
	}
	errs = append(errs, ValidatePool(p)...)
	t := findByName(templates, p.Namespace, p.Spec.TemplateRef.Name)
	if t == nil {
		errs = append(errs, field.NotFound(field.NewPath("spec", "sandboxTemplateRef", "name"), p.Spec.TemplateRef.Name))
	}
	if len(errs) > 0 {
		r.invalid(extv1beta1.SandboxWarmPoolKind, p, errs...)
		return
	}
	hashes, err := TemplateHashes(t)
	if err != nil {
		r.invalid(extv1beta1.SandboxWarmPoolKind, p, field.InternalError(field.NewPath("spec", "sandboxTemplateRef"), err))
		return
	}
	names, ok := r.opts.PoolMemberNames[p.Namespace+"/"+p.Name]
	if !ok {
		names = PoolMemberNames(p.Namespace, p.Name, int(replicas(p)), nil)
	}
	for _, name := range names {
		sb := PoolSandbox(p, t, name, hashes, r.opts)
		r.emitMade(sb, extv1beta1.SandboxWarmPoolKind, p, sandboxMaker{extv1beta1.GroupVersion.Group, extv1beta1.SandboxWarmPoolKind})
	}
}

func (r *renderer) claim(c *extv1beta1.SandboxClaim, in *Input) {
	cp := ResolveClaim(c, in.Pools, in.Templates)
	sb, cerr := ClaimSandbox(c, cp, r.opts)
	if cerr != nil {
		// A missing template is reported once, on the object that names it: when that is a pool
		// of the input, the pool reports it, and its claims do not repeat it (the render fails
		// either way).
		if cerr.Reason == ReasonTemplateNotFound && cp.Pool != nil && findByName(in.Pools, cp.Pool.Namespace, cp.Pool.Name) != nil {
			return
		}
		r.invalid(extv1beta1.SandboxClaimKind, c, cerr.FieldError())
		return
	}
	r.emitMade(sb, extv1beta1.SandboxClaimKind, c, sandboxMaker{extv1beta1.GroupVersion.Group, extv1beta1.SandboxClaimKind})
}

// emitMade emits a Sandbox rendered from a claim or pool (kind, obj), and its children. A
// Sandbox another claim or pool renders already is a finding on the later one's name: the
// message said "rendered twice: from SandboxClaim alice and from SandboxClaim alice" and named
// no file, document or field.
func (r *renderer) emitMade(sb *agentsv1beta1.Sandbox, kind string, obj metav1.Object, ctrl sandboxMaker) {
	parent := describe(kind, obj.GetNamespace(), obj.GetName())
	src := sourceOf(kind, obj)
	child := Child{Object: sb, Parent: parent, Source: src,
		MarkerPath:  []string{"metadata", "labels", agentsv1beta1.SandboxTemplateRefHashLabel},
		MarkerValue: sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel]}
	key := sb.Namespace + "/" + sb.Name
	if prev, dup := r.made[key]; dup {
		name := field.NewPath("metadata", "name")
		if prev.parent == parent {
			// The same claim or pool twice in the input (bundle reports such duplicates before
			// the render; a caller of render may not).
			r.invalid(kind, obj, field.Duplicate(name, obj.GetName()))
			return
		}
		r.invalid(kind, obj, field.Invalid(name, obj.GetName(), fmt.Sprintf("renders %s, which %s renders too; rename one of them",
			describe(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name), prev.parent)))
		return
	}
	r.made[key] = madeSandbox{parent: parent, marker: child.MarkerValue}
	r.emit(child)
	r.children(sb, ctrl, &src)
}

// madeSandbox is what a later hand-written Sandbox of the same name is checked against.
type madeSandbox struct {
	parent string // "SandboxClaim ns/name", as in Child.Parent
	marker string // its template-hash label, as in Child.MarkerValue
}

// handWritten renders a Sandbox from the input, unless it is an earlier render of a Sandbox made
// from a claim or pool (rendering a render's output again must change nothing).
func (r *renderer) handWritten(sb *agentsv1beta1.Sandbox) {
	if made, ok := r.made[sb.Namespace+"/"+sb.Name]; ok {
		if sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] != made.marker || sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] == "" {
			r.invalid(agentsv1beta1.SandboxKind, sb, field.Forbidden(field.NewPath("metadata", "name"),
				"a Sandbox of this name is rendered from "+made.parent+"; rename one of them"))
		}
		return
	}
	r.children(sb, makerOf(sb), nil)
}

// children emits a Sandbox's children with their source: for a Sandbox made from a claim or pool,
// made (that claim's or pool's metadata.name); for a hand-written one (made nil), the Sandbox's
// own field that names each child.
func (r *renderer) children(sb *agentsv1beta1.Sandbox, ctrl sandboxMaker, made *Source) {
	c, err := renderSandbox(sb, ctrl, r.opts)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if expired, deleted := Expiring(sb, r.opts); deleted {
		return
	} else if expired {
		c.Pod = nil
		c.ServiceMode = serviceKeep
	}
	parent := describe(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name)
	hash := NameHash(sb.Name)
	var src Source
	if made != nil {
		src = *made
	} else {
		src = sourceOf(agentsv1beta1.SandboxKind, sb)
	}
	for _, o := range c.Objects() {
		from := src
		// c.PVCs are in the order of the volume claim templates they are rendered from.
		if pvc, isPVC := o.(*corev1.PersistentVolumeClaim); isPVC && made == nil {
			if i := slices.Index(c.PVCs, pvc); i >= 0 {
				from.Field = field.NewPath("spec", "volumeClaimTemplates").Index(i).Child("metadata", "name")
				from.Value = sb.Spec.VolumeClaimTemplates[i].Name
			}
		}
		r.emit(Child{Object: o, Parent: parent, Source: from,
			MarkerPath: []string{"metadata", "labels", agentsv1beta1.SandboxNameHashLabel}, MarkerValue: hash})
	}
}

func sortedByName[T metav1.Object](in []T) []T {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	return out
}

func findByName[T metav1.Object](in []T, namespace, name string) T {
	var zero T
	for _, o := range in {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return zero
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + quote.Name(name)
	}
	return kind + " " + quote.Name(namespace) + "/" + quote.Name(name)
}
