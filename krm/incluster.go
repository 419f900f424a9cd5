package krm

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// configCopies are the copies of the functionConfig the output carries (renderconfig's Copies),
// one in each namespace of the agent-sandbox objects, so the GitOps tool applies the config with
// the tree and the controller renders those namespaces as the preview did. There are none when
// there is no functionConfig (the controller's default then applies, as the render's did not
// know it) or when the sources are not kept (no controller renders them).
//
// A SandboxRender among the items in such a namespace is the config of a render before this one
// (a base rendered already): of the same name, the copy replaces it (replaced); of another name,
// the namespace would hold two, which the controller refuses, so it is an error on that item.
func configCopies(cfg *renderconfig.Config, hasConfig bool, objs []*unstructured.Unstructured) (copies []*unstructured.Unstructured, replaced map[*unstructured.Unstructured]bool, err error) {
	if !hasConfig || !*cfg.Spec.KeepSources {
		return nil, nil, nil
	}
	var namespaces []string
	for _, o := range objs {
		if manifest.IsAgentSandbox(o) {
			namespaces = append(namespaces, o.GetNamespace())
		}
	}
	copies = cfg.Copies(namespaces)
	if len(copies) == 0 {
		return nil, nil, nil
	}
	byNamespace := map[string]string{}
	for _, c := range copies {
		byNamespace[c.GetNamespace()] = c.GetName()
	}
	replaced = map[*unstructured.Unstructured]bool{}
	var errs []error
	for _, o := range objs {
		if o.GetKind() != renderconfig.Kind || o.GetAPIVersion() != renderconfig.APIVersion {
			continue
		}
		name, ok := byNamespace[o.GetNamespace()]
		switch {
		case !ok:
		case o.GetName() == name:
			replaced[o] = true
		default:
			errs = append(errs, &render.InvalidError{Kind: renderconfig.Kind, Namespace: o.GetNamespace(), Name: o.GetName(), Source: o,
				Errs: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), o.GetName(), fmt.Sprintf(
					"the output would hold two SandboxRenders in this namespace, this one and the functionConfig's copy %q, and the controller renders a namespace with one: remove this one, or name the functionConfig %s", name, o.GetName()))}})
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return copies, replaced, nil
}
