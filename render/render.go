package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	// Parent is the source object, as "Kind namespace/name".
	Parent string
	// MarkerPath and MarkerValue: an input object with the child's identity is an earlier render
	// of it when the string at MarkerPath equals MarkerValue.
	MarkerPath  []string
	MarkerValue string
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
		if n := Replicas(p); n <= opts.maxPoolReplicas() {
			members += int64(n)
			if members > limit && over == nil {
				over = p
			}
		}
	}
	if over != nil {
		return &InvalidError{Kind: extv1beta1.SandboxWarmPoolKind, Namespace: over.Namespace, Name: over.Name,
			Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), Replicas(over), fmt.Sprintf(
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
	if errs := ValidateTemplate(t, r.opts); len(errs) > 0 {
		r.invalid(extv1beta1.SandboxTemplateKind, t, errs...)
		return
	}
	if np := TemplateNetworkPolicy(t, r.opts); np != nil {
		r.emit(Child{Object: np, Parent: describe(extv1beta1.SandboxTemplateKind, t.Namespace, t.Name),
			MarkerPath:  []string{"spec", "podSelector", "matchLabels", agentsv1beta1.SandboxTemplateRefHashLabel},
			MarkerValue: NameHash(t.Name)})
	}
}

func (r *renderer) pool(p *extv1beta1.SandboxWarmPool, templates []*extv1beta1.SandboxTemplate) {
	// The limit is checked first: nothing is allocated for a pool of 2^31-1 members.
	var errs field.ErrorList
	if n, limit := Replicas(p), r.opts.maxPoolReplicas(); n > limit {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), n,
			fmt.Sprintf("more than %d members in one pool; split the pool, or raise the limit (SandboxRender spec.maxPoolReplicas)", limit)))
	}
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
		names = PoolMemberNames(p.Namespace, p.Name, int(Replicas(p)), nil)
	}
	for _, name := range names {
		sb := PoolSandbox(p, t, name, hashes, r.opts)
		r.emitMade(sb, extv1beta1.SandboxWarmPoolKind, p, controller{extv1beta1.GroupVersion.Group, extv1beta1.SandboxWarmPoolKind})
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
	r.emitMade(sb, extv1beta1.SandboxClaimKind, c, controller{extv1beta1.GroupVersion.Group, extv1beta1.SandboxClaimKind})
}

// emitMade emits a Sandbox rendered from a claim or pool (kind, obj), and its children. A
// Sandbox another claim or pool renders already is a finding on the later one's name: the
// message said "rendered twice: from SandboxClaim alice and from SandboxClaim alice" and named
// no file, document or field.
func (r *renderer) emitMade(sb *agentsv1beta1.Sandbox, kind string, obj metav1.Object, ctrl controller) {
	parent := describe(kind, obj.GetNamespace(), obj.GetName())
	child := Child{Object: sb, Parent: parent,
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
	r.children(sb, ctrl)
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
	r.children(sb, controllerOf(sb))
}

func (r *renderer) children(sb *agentsv1beta1.Sandbox, ctrl controller) {
	c, err := renderSandbox(sb, ctrl, r.opts)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if expired, deleted := Expiring(sb, r.opts); deleted {
		return
	} else if expired {
		c.Pod = nil
		c.ServiceMode = ServiceKeep
	}
	parent := describe(agentsv1beta1.SandboxKind, sb.Namespace, sb.Name)
	hash := NameHash(sb.Name)
	for _, o := range c.Objects() {
		r.emit(Child{Object: o, Parent: parent,
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
