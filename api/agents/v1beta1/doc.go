// Package v1beta1 holds the agents.x-k8s.io/v1beta1 Sandbox API: the hub version that upstream
// agent-sandbox stores and that every render function consumes. Field names, field order and
// omitempty tags mirror upstream exactly, because upstream hashes Go's encoding/json of these
// types (see render.BlueprintHash) and a reordered field would change every hash.
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion identifies this API; owner references written by render use it.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
