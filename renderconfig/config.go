// Package renderconfig is SandboxRender, the render's configuration: the KRM function's
// functionConfig and the controller's --render-config, read by the one parser here so that a
// preview and the cluster are rendered with the same options. It is apart from krm so that the
// controller does not link the function's machinery (kyaml's framework, the schema validation):
// every package linked into a binary adds to its resident memory.
package renderconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sandbox-gitops/sandbox-gitops/manifest/yamlread"
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

	// written is the spec as the file had it, before defaults: what the copy the render writes
	// into its output carries (see Copies), so it says what the author wrote and nothing more.
	written map[string]any `json:"-"`
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
	// Now, RFC 3339, is the moment to preview: a Sandbox whose shutdownTime has passed by then
	// renders what the controller leaves of it (no Pod or Service; under shutdownPolicy Delete,
	// nothing), with a warning naming the field. Unset, the render does not depend on time.
	Now *metav1.Time `json:"now,omitempty"`
	// MaxPoolReplicas is the most members a SandboxWarmPool may ask for; a pool above it is an
	// error on its spec.replicas before anything is rendered. 0 or unset means 10000.
	MaxPoolReplicas *int32 `json:"maxPoolReplicas,omitempty"`
	// MaxPoolMembers is the most members all pools of one render may ask for together; above it
	// the render is an error before anything is rendered. 0 or unset means 20000.
	MaxPoolMembers *int64 `json:"maxPoolMembers,omitempty"`
	// Resources are objects to render when the function runs as a kustomize generator, which
	// receives no items: the generator emits them and their children.
	Resources []map[string]any `json:"resources,omitempty"`
}

// Parse reads a functionConfig strictly (an unknown or misspelt field is an error), then
// defaults and validates it. An empty config is the all-defaults config. It reads YAML with the
// one reader (manifest/yamlread), and its errors name the field, the value and the type expected.
func Parse(data []byte) (*SandboxRender, error) {
	c := &SandboxRender{APIVersion: APIVersion, Kind: Kind}
	if len(bytes.TrimSpace(data)) > 0 {
		docs, err := yamlread.ReadNodes(data)
		if err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		if len(docs) != 1 {
			return nil, fmt.Errorf("functionConfig: want one %s object, got %d YAML documents", Kind, len(docs))
		}
		u, err := yamlread.NodeObject(docs[0].Node)
		if err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		m := u.Object
		if u.GetAPIVersion() != APIVersion || u.GetKind() != Kind {
			return nil, fmt.Errorf("functionConfig: got apiVersion %q, kind %q: the functionConfig must be %s, kind %s", u.GetAPIVersion(), u.GetKind(), APIVersion, Kind)
		}
		if err := decodeConfig(m, c); err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		c.written, _ = m["spec"].(map[string]any)
	}
	if err := c.Default(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeConfig decodes m into c, reporting a wrong type as a field error with the value written
// and the type expected (rather than the converter's "unrecognized type: bool"), and an unknown
// field by its path.
func decodeConfig(m map[string]any, c *SandboxRender) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, c); err != nil {
		// metav1.Time says only `parsing time "x" as "2006-01-02T15:04:05Z07:00"`.
		var pe *time.ParseError
		if errors.As(err, &pe) {
			v, _, _ := unstructured.NestedFieldNoCopy(m, "spec", "now")
			return field.Invalid(field.NewPath("spec", "now"), v, "must be an RFC 3339 time such as 2026-06-01T12:00:00Z")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			path := strings.Split(te.Field, ".")
			v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
			return field.Invalid(field.NewPath(path[0], path[1:]...), v, "must be "+typeName(te.Type))
		}
		return err
	}
	// Strict: a misspelt knob must not be ignored silently. The converter names the field. It
	// decodes into the fields JSON has (it cannot skip an unexported one).
	strict := &struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata,omitempty"`
		Spec       SandboxRenderSpec `json:"spec,omitempty"`
	}{}
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, strict, true)
}

// typeName says what a user writes for a Go type.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return "of another type"
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
	if errs := c.validate(); len(errs) > 0 {
		return fmt.Errorf("invalid functionConfig %s: %w", Kind, errs.ToAggregate())
	}
	return nil
}

func (c *SandboxRender) validate() field.ErrorList {
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
	if d := c.Spec.ClusterDomain; d != "" {
		for _, msg := range validation.IsDNS1123Subdomain(d) {
			errs = append(errs, field.Invalid(spec.Child("clusterDomain"), d, "the cluster DNS domain Service names end in: "+msg))
		}
	}
	for i, d := range c.Spec.AllowedLabelDomains {
		// A label key's prefix is a DNS subdomain; a domain that is not one allows no label.
		for _, msg := range validation.IsDNS1123Subdomain(d) {
			errs = append(errs, field.Invalid(spec.Child("allowedLabelDomains").Index(i), d, "a label domain claims may use: "+msg))
		}
	}
	if n := c.Spec.MaxPoolReplicas; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("maxPoolReplicas"), *n, "must be 0 or more (0 means the default, 10000)"))
	}
	if n := c.Spec.MaxPoolMembers; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("maxPoolMembers"), *n, "must be 0 or more (0 means the default, 20000)"))
	}
	return errs
}

// Options are the render options the configuration asks for.
func (c *SandboxRender) Options() render.Options {
	o := render.Options{
		ClusterDomain:           c.Spec.ClusterDomain,
		Policies:                c.Spec.Policies,
		AllowedLabelDomains:     c.Spec.AllowedLabelDomains,
		DisableWarmPoolEviction: c.Spec.DisableWarmPoolEviction,
		MaxPoolReplicas:         ptr.Deref(c.Spec.MaxPoolReplicas, 0),
		MaxPoolMembers:          ptr.Deref(c.Spec.MaxPoolMembers, 0),
	}
	if c.Spec.Now != nil {
		t := c.Spec.Now.Time
		o.Now = &t
	}
	return o
}
