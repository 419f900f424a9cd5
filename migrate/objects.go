package migrate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Objects returns objs with every v1alpha1 agent-sandbox object replaced by its v1beta1 form, so
// that an expanded stream applies to CRDs without a conversion webhook running (ours serve
// v1alpha1 only through the controller's; upstream's will drop v1alpha1). It is the render's edge
// on the way out (the CLI and the function convert the sources they write with it), and Object's
// conversion: the object changes only where the versions differ, and no defaults are added. Other objects are returned as the same pointers, in the same
// order. A conversion that would lose information (a claim whose template differs from its
// pool's) is an error naming the object and the field, and nothing is returned.
//
// Object's warnings are not errors here: a "none" warm pool policy becomes a shadow-pool
// reference, but a render always gives such a claim its own cold Sandbox, so nothing changes; and
// every pool a claim names is in the bundle (the render refuses the claim otherwise).
func Objects(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	pools := map[[2]string]string{}
	for _, o := range objs {
		if o.GetKind() == "SandboxWarmPool" && manifest.IsAgentSandbox(o) {
			tmpl, _, _ := unstructured.NestedString(o.Object, "spec", "sandboxTemplateRef", "name")
			pools[[2]string{o.GetNamespace(), o.GetName()}] = tmpl
		}
	}
	opts := Options{PoolTemplate: func(ns, name string) (string, bool) {
		tmpl, ok := pools[[2]string{ns, name}]
		return tmpl, ok
	}}
	out := make([]*unstructured.Unstructured, len(objs))
	var bad manifest.Errors
	for i, o := range objs {
		out[i] = o
		if !convert.IsV1alpha1(o.GetAPIVersion()) {
			continue
		}
		n, err := kyaml.FromMap(o.Object)
		if err != nil {
			return nil, fmt.Errorf("converting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		r := Object(n, opts)
		if r.Failed() {
			ie := &render.InvalidError{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
			for _, f := range r.Findings {
				if !f.Warning {
					ie.Errs = append(ie.Errs, f.Err)
				}
			}
			bad = append(bad, ie)
			continue
		}
		j, err := n.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("converting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("converting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		out[i] = u
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return out, nil
}
