// Package v1alpha1 holds the deprecated agents.x-k8s.io/v1alpha1 Sandbox API that older
// repositories and much of the documentation still use (spec.replicas instead of
// spec.operatingMode). Nothing renders from these types directly: package convert turns them into
// v1beta1, at the render's edge and in the controller's conversion webhook.
//
// The version is served (deprecated, not stored): the CRDs in config/crd send its conversions to
// the webhook that sandbox-controller runs, as upstream's do.
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion identifies this API.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
