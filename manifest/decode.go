package manifest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
	"github.com/sandbox-gitops/sandbox-gitops/internal/quote"
	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Bundle is a set of input objects with the agent-sandbox ones decoded into defaulted v1beta1.
type Bundle struct {
	Sandboxes []*agentsv1beta1.Sandbox
	Templates []*extv1beta1.SandboxTemplate
	Claims    []*extv1beta1.SandboxClaim
	Pools     []*extv1beta1.SandboxWarmPool
	// v1alpha1 holds the objects written as v1alpha1, by "Kind namespace/name", so findings on
	// them name the v1alpha1 fields the user wrote (FieldsAsWritten).
	v1alpha1 map[string]bool
}

// FieldsAsWritten rewrites the field errors of a render error so that an object written as
// v1alpha1 is reported on its v1alpha1 fields: render sees the converted v1beta1 claim, whose
// spec.warmPoolRef.name "shadow-pool-python" the user never wrote; they wrote
// spec.sandboxTemplateRef.name "python" (or spec.warmpool for a named pool).
func (b *Bundle) FieldsAsWritten(err error) {
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case *render.InvalidError:
			if e.Kind != extv1beta1.SandboxClaimKind || !b.v1alpha1[e.Object()] {
				return
			}
			for _, fe := range e.Errs {
				if fe.Field != "spec.warmPoolRef.name" {
					continue
				}
				if v, ok := fe.BadValue.(string); ok && strings.HasPrefix(v, convert.ShadowPoolPrefix) {
					fe.Field, fe.BadValue = "spec.sandboxTemplateRef.name", strings.TrimPrefix(v, convert.ShadowPoolPrefix)
				} else {
					fe.Field = "spec.warmpool"
				}
			}
		}
	}
	walk(err)
}

// Input is what render needs from the bundle.
func (b *Bundle) Input() *render.Input {
	return &render.Input{Sandboxes: b.Sandboxes, Templates: b.Templates, Claims: b.Claims, Pools: b.Pools}
}

// Errors is every invalid object of a bundle. Decode returns all of them at once so a user fixes
// a whole repository in one pass.
type Errors []*render.InvalidError

// Unwrap exposes each object's error to errors.As and to tree walks.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, ie := range e {
		out[i] = ie
	}
	return out
}

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, ie := range e {
		msgs[i] = ie.Error()
	}
	return strings.Join(msgs, "\n")
}

// kind says how to decode one GroupVersionKind: the Go type it decodes into and, for v1alpha1,
// the conversion to the v1beta1 hub. It is the conversion webhook's own (convert's *ToHub), so
// a v1alpha1 object renders as the cluster stores it, v1beta1 fields the webhook kept in an
// annotation of an exported copy included.
type kind struct {
	newObject func() runtime.Object
	toHub     func(runtime.Object) runtime.Object
}

var kinds = map[schema.GroupVersionKind]kind{
	agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind):    {newObject: func() runtime.Object { return &agentsv1beta1.Sandbox{} }},
	extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxTemplateKind):  {newObject: func() runtime.Object { return &extv1beta1.SandboxTemplate{} }},
	extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind):     {newObject: func() runtime.Object { return &extv1beta1.SandboxClaim{} }},
	extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxWarmPoolKind):  {newObject: func() runtime.Object { return &extv1beta1.SandboxWarmPool{} }},
	agentsv1alpha1.GroupVersion.WithKind(agentsv1beta1.SandboxKind):   alpha(convert.SandboxToHub),
	extv1alpha1.GroupVersion.WithKind(extv1beta1.SandboxTemplateKind): alpha(convert.SandboxTemplateToHub),
	extv1alpha1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind):    alpha(convert.SandboxClaimToHub),
	extv1alpha1.GroupVersion.WithKind(extv1beta1.SandboxWarmPoolKind): alpha(convert.SandboxWarmPoolToHub),
}

// alpha describes a v1alpha1 kind by its conversion function.
func alpha[In any, PIn interface {
	*In
	runtime.Object
}, Out runtime.Object](conv func(PIn) Out) kind {
	return kind{
		newObject: func() runtime.Object { return PIn(new(In)) },
		toHub:     func(o runtime.Object) runtime.Object { return conv(o.(PIn)) },
	}
}

// IsAgentSandbox reports whether obj is one of the four kinds this project renders, in any
// version.
func IsAgentSandbox(obj *unstructured.Unstructured) bool {
	g := obj.GroupVersionKind().Group
	return g == agentsv1beta1.GroupVersion.Group || g == extv1beta1.GroupVersion.Group
}

// Decode admits every agent-sandbox object as the API server would (unknown fields, defaults,
// schema validation), converts v1alpha1 to v1beta1, and returns the bundle. Other objects are
// kept as they are, once their metadata is one any API server takes (yamlread.MetadataProblems).
// Any invalid object makes Decode return Errors and no bundle.
func Decode(objs []*unstructured.Unstructured) (*Bundle, error) {
	all, err := schemas()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	// Admission is independent per object and the costliest step of a large render: run it on
	// every core, then assemble in input order so the result does not depend on scheduling.
	type result struct {
		obj runtime.Object
		err *render.InvalidError
	}
	results := make([]result, len(objs))
	parallel.Each(len(objs), func(i int) {
		if IsAgentSandbox(objs[i]) {
			results[i].obj, results[i].err = admitObject(all, objs[i])
			return
		}
		// Passed through as written, an object still goes to an API server, and through
		// kustomize's kyaml in a build: metadata neither reads as written (a name that is a
		// list, annotations: [x], an annotation k: [v]) is refused here, as build refuses it
		// before kustomize reads it.
		if errs := yamlread.MetadataProblems(objs[i].Object, nil); len(errs) > 0 {
			o := objs[i]
			results[i].err = &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Errs: errs, Source: o}
		}
	})

	b := &Bundle{v1alpha1: map[string]bool{}}
	var bad Errors
	for i, r := range results {
		if r.obj != nil && kinds[objs[i].GroupVersionKind()].toHub != nil {
			m := r.obj.(metav1.Object)
			b.v1alpha1[objs[i].GetKind()+" "+describeName(m.GetNamespace(), m.GetName())] = true
		}
		switch t := r.obj.(type) {
		case nil:
			if r.err != nil {
				bad = append(bad, r.err)
			}
		case *agentsv1beta1.Sandbox:
			b.Sandboxes = append(b.Sandboxes, t)
		case *extv1beta1.SandboxTemplate:
			b.Templates = append(b.Templates, t)
		case *extv1beta1.SandboxClaim:
			b.Claims = append(b.Claims, t)
		case *extv1beta1.SandboxWarmPool:
			b.Pools = append(b.Pools, t)
		}
	}
	if len(bad) > 0 {
		// By object, then by message: two invalid objects of one name (in different apiVersions)
		// are reported in the same order whatever the input order.
		sort.SliceStable(bad, func(i, j int) bool {
			if oi, oj := bad[i].Object(), bad[j].Object(); oi != oj {
				return oi < oj
			}
			return bad[i].Error() < bad[j].Error()
		})
		return nil, bad
	}
	return b, nil
}

// admitObject admits, converts and validates one agent-sandbox object, returning the typed v1beta1
// object or why it is invalid. It does not modify o.
func admitObject(all map[schema.GroupVersionKind]*versionSchema, o *unstructured.Unstructured) (runtime.Object, *render.InvalidError) {
	gvk := o.GroupVersionKind()
	invalid := func(errs ...*field.Error) (runtime.Object, *render.InvalidError) {
		return nil, &render.InvalidError{Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName(), Errs: errs}
	}
	vs, ok := all[gvk]
	if !ok {
		return invalid(field.NotSupported(field.NewPath("apiVersion"), o.GetAPIVersion(), knownVersions(all, gvk)))
	}
	// Metadata first, as the API server validates ObjectMeta apart from the CRD schema; every
	// problem of the object is reported together.
	metaErrs, meta := validateMetadata(o.Object)
	obj := runtime.DeepCopyJSON(o.Object)
	if errs := vs.admit(obj); len(errs) > 0 || meta == nil {
		return invalid(append(metaErrs, errs...)...)
	}
	if errs := checkTimes(obj); len(errs) > 0 {
		return invalid(append(metaErrs, errs...)...)
	}
	k := kinds[gvk]
	target := k.newObject()
	if err := fromUnstructured(obj, target); err != nil {
		return invalid(append(metaErrs, err)...)
	}
	if k.toHub != nil {
		// v1alpha1 objects become v1beta1 and are then admitted again under the v1beta1 schema,
		// as the API server defaults an object after converting it to the storage version.
		hub := k.toHub(target)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(hub)
		if err != nil {
			return invalid(field.InternalError(nil, err))
		}
		if errs := all[hub.GetObjectKind().GroupVersionKind()].admit(m); len(errs) > 0 {
			return invalid(errs...)
		}
		target = kinds[hub.GetObjectKind().GroupVersionKind()].newObject()
		if err := fromUnstructured(m, target); err != nil {
			return invalid(err)
		}
	}
	if sb, ok := target.(*agentsv1beta1.Sandbox); ok {
		// What the schema cannot say (name rules of the children) is checked here too, so one run
		// reports every problem of every object.
		for _, e := range render.ValidateSandbox(sb) {
			// ObjectMeta validation has said it already: the Pod name rule is the same.
			if e.Field == "metadata.name" && strings.HasPrefix(e.Detail, "the Sandbox name is also the Pod name") && hasField(metaErrs, e.Field) {
				continue
			}
			metaErrs = append(metaErrs, e)
		}
	}
	if c, ok := target.(*extv1beta1.SandboxClaim); ok {
		// The claim CRD's CEL rules (env value or valueFrom), which a render does not run.
		metaErrs = append(metaErrs, render.ValidateClaim(c)...)
	}
	if p, ok := target.(*extv1beta1.SandboxWarmPool); ok {
		// The pool CRD's CEL rules (a RollingUpdate's bounds), which a render does not run.
		metaErrs = append(metaErrs, render.ValidatePool(p)...)
	}
	// Every volume claim template becomes a PVC the render emits: the schema takes any access
	// mode and any annotation key, the API server does not.
	vcts := field.NewPath("spec", "volumeClaimTemplates")
	switch t := target.(type) {
	case *agentsv1beta1.Sandbox:
		metaErrs = append(metaErrs, render.ValidateVolumeClaimTemplates(t.Spec.VolumeClaimTemplates, vcts)...)
	case *extv1beta1.SandboxTemplate:
		metaErrs = append(metaErrs, render.ValidateVolumeClaimTemplates(t.Spec.VolumeClaimTemplates, vcts)...)
	case *extv1beta1.SandboxClaim:
		metaErrs = append(metaErrs, render.ValidateVolumeClaimTemplates(t.Spec.VolumeClaimTemplates, vcts)...)
	}
	if len(metaErrs) > 0 {
		return invalid(metaErrs...)
	}
	return target, nil
}

// fromUnstructured decodes an admitted object. The schema checked the spec, so a failure here is
// almost always malformed metadata (which CRD schemas do not describe), say a number as a uid.
func fromUnstructured(obj map[string]any, into runtime.Object) *field.Error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into); err != nil {
		return field.TypeInvalid(field.NewPath("metadata"), "", "cannot decode the object, check the types of its metadata fields: "+err.Error())
	}
	return nil
}

func knownVersions(all map[schema.GroupVersionKind]*versionSchema, gvk schema.GroupVersionKind) []string {
	var out []string
	for k := range all {
		if k.Group == gvk.Group && k.Kind == gvk.Kind {
			out = append(out, k.GroupVersion().String())
		}
	}
	if len(out) == 0 {
		return []string{"(no such kind in " + gvk.Group + ")"}
	}
	sort.Strings(out)
	return out
}

func hasField(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}

func describeName(namespace, name string) string {
	if namespace == "" {
		return quote.Name(name)
	}
	return quote.Name(namespace) + "/" + quote.Name(name)
}

// timeFields are the metav1.Time fields of our kinds. The schema's date-time format accepts
// offsets Go cannot parse (+25:00); decoding then failed with an error blamed on metadata.
var timeFields = [][]string{{"spec", "shutdownTime"}, {"spec", "lifecycle", "shutdownTime"}}

func checkTimes(obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	for _, p := range timeFields {
		v, found, err := unstructured.NestedString(obj, p...)
		if err != nil || !found || v == "" {
			continue
		}
		if _, perr := time.Parse(time.RFC3339, v); perr != nil {
			msg := perr.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			errs = append(errs, field.Invalid(field.NewPath(p[0], p[1:]...), v, "must be an RFC 3339 date and time, such as 2026-01-02T15:04:05Z: "+msg))
		}
	}
	return errs
}
