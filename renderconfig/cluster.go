package renderconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// The Ready condition a SandboxRender in the cluster carries, and its reasons
// (api/render/v1alpha1 names them for clients; they are repeated here so that the render side
// does not import the API package).
const (
	ConditionReady = "Ready"
	ReasonInForce  = "InForce"
	ReasonInvalid  = "Invalid"
	ReasonConflict = "Conflict"
)

// Object is what the resolution reads of one SandboxRender in the cluster.
type Object struct {
	Name       string
	Generation int64
	// Spec is the object's spec as JSON; empty or null is the all-defaults spec.
	Spec []byte
}

// Resolution is the render config in force in one namespace, and what each SandboxRender there
// is to say about it.
type Resolution struct {
	// Options render the namespace's objects. Meaningless when Err is set.
	Options render.Options
	// InForce names the SandboxRender in force; "" when the namespace has none and the
	// cluster-wide default is.
	InForce string
	// Err says why no config is in force: two or more SandboxRenders, or one that fails
	// validation. The namespace's objects then keep their last good render: a pass of them
	// changes nothing rather than render with options the tree's preview did not use.
	Err error
	// Ready is the Ready condition each SandboxRender of the namespace is to carry, by name
	// (no LastTransitionTime: the writer keeps the one it has when the status is unchanged).
	Ready map[string]metav1.Condition
}

// FromSpec reads a SandboxRender's spec as the cluster holds it, with the functionConfig's
// rules: strictly (a misspelt knob is an error naming it), defaulted and validated. A moment to
// preview (spec.now) is refused, as --render-config refuses it: the controller acts on its clock
// and would silently ignore it. The errors are field errors naming the path under spec.
func FromSpec(spec []byte) (*Config, field.ErrorList) {
	m := map[string]any{"apiVersion": APIVersion, "kind": Kind}
	if s := strings.TrimSpace(string(spec)); s != "" && s != "null" {
		var v any
		if err := json.Unmarshal(spec, &v); err != nil {
			return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, err.Error())}
		}
		m["spec"] = v
	}
	c := &Config{APIVersion: APIVersion, Kind: Kind}
	errs, err := decodeConfig(m, c)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, err.Error())}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	_ = c.Default()
	errs = c.validate()
	if c.Spec.Now != nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "now"),
			"previews a moment in a render; the controller uses its clock, remove it (the function leaves it out of the copy it writes)"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Resolve decides the config of a namespace from its SandboxRenders: none, and the fallback (the
// controller's cluster-wide default) is in force; exactly one that is valid, and it is, in place
// of the fallback and not merged with it, as the tree's preview used it alone; otherwise
// nothing is, and Err says why. It does not depend on the order of objs.
func Resolve(namespace string, objs []Object, fallback render.Options) Resolution {
	res := Resolution{Options: fallback, Ready: map[string]metav1.Condition{}}
	switch len(objs) {
	case 0:
		return res
	case 1:
		o := objs[0]
		cfg, errs := FromSpec(o.Spec)
		if len(errs) > 0 {
			res.Err = fmt.Errorf("SandboxRender %s/%s: %w", namespace, o.Name, errs.ToAggregate())
			res.Ready[o.Name] = ready(o, metav1.ConditionFalse, ReasonInvalid, fmt.Sprintf(
				"%s; the objects of namespace %s keep their last good render until it is fixed", errs.ToAggregate(), namespace))
			return res
		}
		res.Options = cfg.Options()
		res.Options.Now = nil
		res.InForce = o.Name
		res.Ready[o.Name] = ready(o, metav1.ConditionTrue, ReasonInForce, fmt.Sprintf(
			"generation %d renders the agent-sandbox objects of namespace %s", o.Generation, namespace))
		return res
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	slices.Sort(names)
	res.Err = fmt.Errorf("namespace %s has %d SandboxRenders (%s): one namespace is rendered with one", namespace, len(names), strings.Join(names, ", "))
	for _, o := range objs {
		res.Ready[o.Name] = ready(o, metav1.ConditionFalse, ReasonConflict, fmt.Sprintf(
			"namespace %s has %d SandboxRenders (%s) and is rendered with one: delete all but one; until then its objects keep their last good render",
			namespace, len(names), strings.Join(names, ", ")))
	}
	return res
}

func ready(o Object, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: o.Generation}
}

// DefaultName names the copy of a functionConfig that has no metadata.name.
const DefaultName = "sandbox-render"

// functionOnly are the spec's knobs that shape the function's output rather than the render of
// an object, which the copy leaves out: the controller has no output to shape, and spec.now (a
// moment to preview) and spec.resources (objects the output holds already) would be wrong or
// twice written there.
var functionOnly = []string{"mode", "keepSources", "keepSourceVersions", "now", "resources"}

// Copies are the SandboxRender objects a render writes with its output, one in each of the
// namespaces given (those of its agent-sandbox objects; "" is the applier's default namespace),
// so that the config travels with the tree and the controller renders each namespace with the
// options its preview used. Each carries the spec as written, without the function-only knobs,
// with the cluster domain a flag set in place of the written one, and the config's name, labels
// and annotations, without the ones kustomize and kyaml use to run and place functions.
func (c *Config) Copies(namespaces []string) []*unstructured.Unstructured {
	spec := map[string]any{}
	for k, v := range c.written {
		if !slices.Contains(functionOnly, k) {
			spec[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	if d := c.Spec.ClusterDomain; d != "" {
		spec["clusterDomain"] = d
	}
	meta, _ := runtime.DeepCopyJSONValue(c.Metadata).(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		name = DefaultName
	}
	var labels, annotations map[string]any
	if l, ok := meta["labels"].(map[string]any); ok && len(l) > 0 {
		labels = l
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		for k := range a {
			if isFunctionAnnotation(k) {
				delete(a, k)
			}
		}
		if len(a) > 0 {
			annotations = a
		}
	}
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	out := make([]*unstructured.Unstructured, 0, len(ns))
	for _, n := range ns {
		md := map[string]any{"name": name}
		if n != "" {
			md["namespace"] = n
		}
		if labels != nil {
			md["labels"] = runtime.DeepCopyJSONValue(labels)
		}
		if annotations != nil {
			md["annotations"] = runtime.DeepCopyJSONValue(annotations)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": APIVersion, "kind": Kind, "metadata": md}}
		if len(spec) > 0 {
			u.Object["spec"] = runtime.DeepCopyJSONValue(spec)
		}
		out = append(out, u)
	}
	return out
}

// isFunctionAnnotation: the annotations by which kustomize and kyaml run a function and place
// its items (config.kubernetes.io/function, local-config, path, index, origin and the
// internal.config.kubernetes.io ones); they mean nothing on an object in the cluster, and
// local-config would make kustomize drop the copy.
func isFunctionAnnotation(k string) bool {
	for _, p := range []string{"config.kubernetes.io/", "internal.config.kubernetes.io/", "config.k8s.io/", "kustomize.config.k8s.io/"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
