// Package v1alpha1 holds the render.sandbox-gitops.dev/v1alpha1 API: SandboxRender, the render's
// configuration as an object in the cluster. A tree's render.yaml is the KRM function's
// functionConfig; the function keeps a copy of it in its output, so the GitOps tool applies it
// with the tree, and the controller renders the namespace with it. The preview of a pull request
// and the controller then read the same options by construction, not by a flag that must agree.
//
// The spec is the functionConfig's spec, validated by renderconfig (the one parser of it) rather
// than by the API server's schema: a wrong value is a condition on the object naming the field,
// and what it governs keeps its last good render, where a schema would refuse the apply and
// stall the whole sync.
//
// +kubebuilder:object:generate=true
// +groupName=render.sandbox-gitops.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion identifies this API. It is the functionConfig's apiVersion too.
	GroupVersion = schema.GroupVersion{Group: "render.sandbox-gitops.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// SandboxRenderKind is the kind's name, the functionConfig's kind too.
const SandboxRenderKind = "SandboxRender"
