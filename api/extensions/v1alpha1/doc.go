// Package v1alpha1 holds the deprecated extensions.agents.x-k8s.io/v1alpha1 API. The claim is
// shaped differently from v1beta1 (sandboxTemplateRef plus a warmpool policy instead of a
// mandatory warmPoolRef). Package convert turns these into v1beta1, at the render's edge and in
// the controller's conversion webhook; the version is served (deprecated, not stored) through
// that webhook, as upstream's is.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion identifies this API.
	GroupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
