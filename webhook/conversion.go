// Package webhook serves the CRDs' conversion between v1alpha1 and the stored v1beta1, as
// sandbox-controller runs it: controller-runtime's conversion handler over package convert's
// lossless pairs (v1beta1 the hub), and a Rotator that makes, renews and publishes the serving
// certificate so that nothing else has to be installed.
package webhook

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
)

// Path is where the CRDs' conversion stanza (config/crd/patches) sends ConversionReviews.
const Path = "/convert"

// Handler is the conversion webhook for the four kinds. It has a scheme of its own with both
// versions, so the manager's scheme (v1beta1 only, what the reconcilers read) stays as it is.
func Handler() (http.Handler, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		agentsv1alpha1.AddToScheme, agentsv1beta1.AddToScheme, extv1alpha1.AddToScheme, extv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	registry := crconversion.NewRegistry()
	converters := []struct {
		hub  client.Object
		make func(*runtime.Scheme) (crconversion.Converter, error)
	}{
		{&agentsv1beta1.Sandbox{}, crconversion.NewHubSpokeConverter(&agentsv1beta1.Sandbox{},
			crconversion.NewSpokeConverter(&agentsv1alpha1.Sandbox{}, pair(convert.SandboxFromHub), pair(convert.SandboxToHub)))},
		{&extv1beta1.SandboxTemplate{}, crconversion.NewHubSpokeConverter(&extv1beta1.SandboxTemplate{},
			crconversion.NewSpokeConverter(&extv1alpha1.SandboxTemplate{}, pair(convert.SandboxTemplateFromHub), pair(convert.SandboxTemplateToHub)))},
		{&extv1beta1.SandboxClaim{}, crconversion.NewHubSpokeConverter(&extv1beta1.SandboxClaim{},
			crconversion.NewSpokeConverter(&extv1alpha1.SandboxClaim{}, pair(convert.SandboxClaimFromHub), pair(convert.SandboxClaimToHub)))},
		{&extv1beta1.SandboxWarmPool{}, crconversion.NewHubSpokeConverter(&extv1beta1.SandboxWarmPool{},
			crconversion.NewSpokeConverter(&extv1alpha1.SandboxWarmPool{}, pair(convert.SandboxWarmPoolFromHub), pair(convert.SandboxWarmPoolToHub)))},
	}
	for _, c := range converters {
		gvks, _, err := s.ObjectKinds(c.hub)
		if err != nil {
			return nil, err
		}
		conv, err := c.make(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvks[0].Kind, err)
		}
		if err := registry.RegisterConverter(gvks[0].GroupKind(), conv); err != nil {
			return nil, err
		}
	}
	return crconversion.NewWebhookHandler(s, registry), nil
}

// pair adapts one of package convert's functions to controller-runtime's converter signature.
func pair[In, Out any](f func(*In) *Out) func(context.Context, *In, *Out) error {
	return func(_ context.Context, in *In, out *Out) error {
		*out = *f(in)
		return nil
	}
}
