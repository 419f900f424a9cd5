package bundle

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Warnings are every finding of a render of objs that does not stop it, sorted: the Sandboxes a
// preview at opts.Now renders past their shutdownTime (ExpiryWarnings) and the templates whose
// own NetworkPolicy surprises (NetworkPolicyWarnings). The CLI, the function and the golden tests
// all report these. Nothing for input Expand rejects.
func Warnings(objs []*unstructured.Unstructured, opts render.Options) []Warning {
	out := append(ExpiryWarnings(objs, opts), NetworkPolicyWarnings(objs, opts)...)
	slices.SortFunc(out, func(a, b Warning) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// NetworkPolicyWarnings are render.TemplateNetworkPolicyWarnings for every SandboxTemplate of
// objs: a template's own policy, rendered as upstream renders it, that refuses the router,
// allows no DNS to Pods that use it, or denies everything. Only the templates are decoded again
// (a few objects, where a render may hold tens of thousands).
func NetworkPolicyWarnings(objs []*unstructured.Unstructured, opts render.Options) []Warning {
	var templates []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == extv1beta1.SandboxTemplateKind && manifest.IsAgentSandbox(o) {
			templates = append(templates, o)
		}
	}
	if len(templates) == 0 {
		return nil
	}
	b, err := manifest.Decode(templates)
	if err != nil {
		return nil
	}
	var out []Warning
	for _, t := range b.Templates {
		for _, w := range render.TemplateNetworkPolicyWarnings(t, opts) {
			out = append(out, Warning{Kind: extv1beta1.SandboxTemplateKind, Namespace: t.Namespace, Name: t.Name, Field: w.Field, Message: w.Message})
		}
	}
	slices.SortFunc(out, func(a, b Warning) int { return strings.Compare(a.String(), b.String()) })
	return out
}
