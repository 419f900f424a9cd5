// Package v1beta1 holds the extensions.agents.x-k8s.io/v1beta1 API (SandboxTemplate,
// SandboxClaim, SandboxWarmPool): the hub version upstream stores and render consumes. JSON
// names, field order and omitempty tags mirror upstream exactly.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion identifies this API; owner references written by render use it.
	GroupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, used in owner references and error messages.
const (
	SandboxTemplateKind = "SandboxTemplate"
	SandboxClaimKind    = "SandboxClaim"
	SandboxWarmPoolKind = "SandboxWarmPool"
)
