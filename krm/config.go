// Package krm is the KRM function: a ResourceList in, the same list with every agent-sandbox
// object's children added (or, in validate mode, only results), following the KRM functions
// specification and kyaml's fn/framework conventions. It is pure: the items and the function
// config in, items and results out; the binary (cmd/sandbox-render) does the I/O.
package krm

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/policies"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// The functionConfig's identity.
const (
	APIVersion = "render.sandbox-gitops.dev/v1alpha1"
	Kind       = "SandboxRender"
)

// Mode is what the function does with the items.
type Mode string

const (
	// ModeExpand adds the children of every agent-sandbox object to the items.
	ModeExpand Mode = "expand"
	// ModeValidate only reports problems; the items pass through unchanged (a kustomize
	// validator must not change them).
	ModeValidate Mode = "validate"
)

// SandboxRender is the function's configuration (the ResourceList's functionConfig).
type SandboxRender struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
	Spec       SandboxRenderSpec `json:"spec,omitempty"`
}

// SandboxRenderSpec holds the knobs of a render.
type SandboxRenderSpec struct {
	// Mode is expand (the default) or validate.
	Mode Mode `json:"mode,omitempty"`
	// KeepSources keeps the agent-sandbox objects themselves in the output of expand (the
	// default). false emits only what they render to, for clusters without the CRDs' controller.
	KeepSources *bool `json:"keepSources,omitempty"`
	// KeepSourceVersions keeps v1alpha1 sources as written in the output of expand. By default
	// they are converted to v1beta1, the version our CRDs serve (and upstream's, once it drops
	// v1alpha1), so the output applies; keep them only for clusters that still serve v1alpha1.
	KeepSourceVersions bool `json:"keepSourceVersions,omitempty"`
	// ClusterDomain forms Service FQDNs; default cluster.local.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// Policies are the secure defaults' knobs and the policy packs.
	Policies policies.Config `json:"policies,omitempty"`
	// AllowedLabelDomains for claims' additionalPodMetadata labels; default sandbox.users.io.
	AllowedLabelDomains []string `json:"allowedLabelDomains,omitempty"`
	// DisableWarmPoolEviction stops marking warm pool pods safe to evict.
	DisableWarmPoolEviction bool `json:"disableWarmPoolEviction,omitempty"`
	// Resources are objects to render when the function runs as a kustomize generator, which
	// receives no items: the generator emits them and their children.
	Resources []map[string]any `json:"resources,omitempty"`
}

// ParseConfig reads a functionConfig strictly (an unknown or misspelt field is an error), then
// defaults and validates it. An empty config is the all-defaults config.
func ParseConfig(data []byte) (*SandboxRender, error) {
	c := &SandboxRender{APIVersion: APIVersion, Kind: Kind}
	if len(data) > 0 {
		var id struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(data, &id); err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		if id.APIVersion != APIVersion || id.Kind != Kind {
			return nil, fmt.Errorf("functionConfig: got apiVersion %q, kind %q: the functionConfig must be %s, kind %s", id.APIVersion, id.Kind, APIVersion, Kind)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		// Strict: a misspelt knob must not be ignored silently. The converter names the field.
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, c, true); err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
	}
	if err := c.Default(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Default fills in the defaults (kyaml's framework.Defaulter).
func (c *SandboxRender) Default() error {
	if c.Spec.Mode == "" {
		c.Spec.Mode = ModeExpand
	}
	if c.Spec.KeepSources == nil {
		t := true
		c.Spec.KeepSources = &t
	}
	return nil
}

// Validate checks the configuration (kyaml's framework.Validator).
func (c *SandboxRender) Validate() error {
	var errs field.ErrorList
	if c.APIVersion != APIVersion || c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion+"/"+c.Kind,
			fmt.Sprintf("the functionConfig must be %s, kind %s", APIVersion, Kind)))
	}
	spec := field.NewPath("spec")
	switch c.Spec.Mode {
	case ModeExpand, ModeValidate:
	default:
		errs = append(errs, field.NotSupported(spec.Child("mode"), c.Spec.Mode, []Mode{ModeExpand, ModeValidate}))
	}
	errs = append(errs, c.Spec.Policies.Validate(spec.Child("policies"))...)
	if len(errs) > 0 {
		return fmt.Errorf("invalid functionConfig %s: %w", Kind, errs.ToAggregate())
	}
	return nil
}

var (
	_ framework.Defaulter = &SandboxRender{}
	_ framework.Validator = &SandboxRender{}
)

// Options are the render options the configuration asks for.
func (c *SandboxRender) Options() render.Options {
	return render.Options{
		ClusterDomain:           c.Spec.ClusterDomain,
		Policies:                c.Spec.Policies,
		AllowedLabelDomains:     c.Spec.AllowedLabelDomains,
		DisableWarmPoolEviction: c.Spec.DisableWarmPoolEviction,
	}
}
