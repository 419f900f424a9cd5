// Package renderconfig reads a SandboxRender, the render's configuration: the KRM function's
// functionConfig, the controller's --render-config and the spec of the objects in the cluster,
// read by the one parser here so that a preview and the cluster are rendered with the same
// options. It is apart from krm so that the
// controller does not link the function's machinery (kyaml's framework, the schema validation):
// every package linked into a binary adds to its resident memory.
package renderconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

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

// Config is a SandboxRender as the render reads it: parsed strictly, defaulted and validated,
// its spec typed. The one type named SandboxRender is the API's (api/render/v1alpha1), the object
// in Git and in the cluster; it keeps its spec as JSON so that the API server takes any spec and
// a bad value becomes a condition naming the field, and its metadata typed. Config keeps the spec
// typed and the metadata as written (a map), so that metadata no API server would take is a
// field error of the configuration rather than a failure to decode it. One type cannot be both,
// so this one is the API object's reading, under a name of its own.
type Config struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Spec       Spec           `json:"spec,omitempty"`

	// written is the spec as the file had it, before defaults: what the copy the render writes
	// into its output carries (see Copies), so it says what the author wrote and nothing more.
	written map[string]any `json:"-"`
}

// Spec holds the knobs of a render.
type Spec struct {
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
	// ClaimReadyDeadlineSeconds is how long a claim's Sandbox may stay not Ready, from the
	// claim's creation or its last Ready, before the claim's Ready condition turns to reason
	// ProgressDeadlineExceeded, saying it will not become Ready by itself; the controller's only
	// (a render has no time). 0 or unset means 600, a Deployment's default progress deadline.
	ClaimReadyDeadlineSeconds *int32 `json:"claimReadyDeadlineSeconds,omitempty"`
	// Resources are objects to render when the function runs as a kustomize generator, which
	// receives no items: the generator emits them and their children.
	Resources []map[string]any `json:"resources,omitempty"`
}

// Parse reads a functionConfig strictly (an unknown or misspelt field is an error), then
// defaults and validates it. An empty config is the all-defaults config. It reads YAML with the
// one reader (manifest/yamlread). A problem of a field is an *Error naming the field, the value
// and the type expected, and the field's line in data.
func Parse(data []byte) (*Config, error) { return ParseAt(data, 0) }

// ParseAt is Parse for a configuration that is one document of a larger file, whose content
// starts on line start of that file (yamlread.Document.Line), so that the lines of its errors are
// the file's. start 0: data is the whole file.
func ParseAt(data []byte, start int) (*Config, error) {
	c := &Config{APIVersion: APIVersion, Kind: Kind}
	var node *kyaml.Node
	if len(bytes.TrimSpace(data)) > 0 {
		docs, err := yamlread.ReadNodes(data)
		if err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		if len(docs) != 1 {
			return nil, fmt.Errorf("functionConfig: want one %s object, got %d YAML documents", Kind, len(docs))
		}
		node = docs[0].Node
		if start > 0 {
			yamlread.Shift(node, start-docs[0].Line, 0)
		}
		u, err := yamlread.NodeObject(node)
		if err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		m := u.Object
		if u.GetAPIVersion() != APIVersion || u.GetKind() != Kind {
			return nil, fmt.Errorf("functionConfig: got apiVersion %q, kind %q: the functionConfig must be %s, kind %s", u.GetAPIVersion(), u.GetKind(), APIVersion, Kind)
		}
		errs, err := decodeConfig(m, c)
		if err != nil {
			return nil, fmt.Errorf("functionConfig: %w", err)
		}
		if len(errs) > 0 {
			return nil, located("functionConfig", node, errs)
		}
		c.written, _ = m["spec"].(map[string]any)
	}
	if err := c.Default(); err != nil {
		return nil, err
	}
	if errs := c.validate(); len(errs) > 0 {
		return nil, located("invalid functionConfig "+Kind, node, errs)
	}
	return c, nil
}

// Error is a configuration Parse refused for problems of its fields, each placed at its field's
// line, so that a person reading a file can be told where to look (In).
type Error struct {
	// Problems are in the order of their lines (of their fields' paths when lines are unknown).
	Problems []Problem
	// what leads Error(): what kind of problem the configuration has.
	what string
}

// Problem is one problem of a configuration's field.
type Problem struct {
	// Field is the field's path, spec.policies.networkPolicy.dns.
	Field string
	// Line is the field's line in the file, or of the nearest field above it the file writes; 0
	// when the configuration was not read from YAML.
	Line int
	// Message says what is wrong, naming the field: `spec.mode: Unsupported value: "x": ...`, or
	// for a field the configuration does not have, "unknown field `spec.x` (did you mean `y`?)".
	Message string
}

// Error is every problem in one line, without the lines: the function, which reads its config
// from a ResourceList, does not know the file's lines.
func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	return e.what + ": " + strings.Join(msgs, "; ")
}

// In is every problem in one line, each led by file:line as compilers place theirs
// (render.yaml:12: unknown field `spec.x`), or by the file alone when the line is unknown.
func (e *Error) In(file string) string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = file + ": " + p.Message
		if p.Line > 0 {
			msgs[i] = fmt.Sprintf("%s:%d: %s", file, p.Line, p.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// located is errs as an *Error, each at its field's line in node (nil: not read from YAML).
func located(what string, node *kyaml.Node, errs field.ErrorList) *Error {
	e := &Error{what: what, Problems: make([]Problem, len(errs))}
	for i, fe := range errs {
		p := Problem{Field: fe.Field, Message: fe.Error()}
		if node != nil {
			p.Line = yamlread.FieldLine(node, fe.Field)
		}
		if fe.Type == field.ErrorTypeForbidden && strings.HasPrefix(fe.Detail, unknownDetail) {
			p.Message = "unknown field `" + fe.Field + "`" + strings.TrimPrefix(fe.Detail, unknownDetail)
		}
		e.Problems[i] = p
	}
	sort.SliceStable(e.Problems, func(i, j int) bool { return e.Problems[i].Line < e.Problems[j].Line })
	return e
}

// decodeConfig decodes m into c. A field c does not have, or a value of the wrong type, is a
// field error (errs) with the value written and the type expected, rather than the converter's
// "unrecognized type: bool" or encoding/json's words; err is any other failure.
func decodeConfig(m map[string]any, c *Config) (errs field.ErrorList, err error) {
	// Strict: a misspelt knob must not be ignored silently. Checked first: encoding/json matches
	// keys regardless of case, and would take DNS for dns.
	if errs := unknownFields(m, reflect.TypeOf(c).Elem(), nil); len(errs) > 0 {
		return errs, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, c); err != nil {
		// metav1.Time says only `parsing time "x" as "2006-01-02T15:04:05Z07:00"`.
		var pe *time.ParseError
		if errors.As(err, &pe) {
			v, _, _ := unstructured.NestedFieldNoCopy(m, "spec", "now")
			return field.ErrorList{field.Invalid(field.NewPath("spec", "now"), v, "must be an RFC 3339 time such as 2026-06-01T12:00:00Z")}, nil
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			path := strings.Split(te.Field, ".")
			v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
			return field.ErrorList{field.Invalid(field.NewPath(path[0], path[1:]...), v, "must be "+typeName(te.Type))}, nil
		}
		return nil, err
	}
	return nil, nil
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
func (c *Config) Default() error {
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
func (c *Config) Validate() error {
	if errs := c.validate(); len(errs) > 0 {
		return fmt.Errorf("invalid functionConfig %s: %w", Kind, errs.ToAggregate())
	}
	return nil
}

func (c *Config) validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion || c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion+"/"+c.Kind,
			fmt.Sprintf("the functionConfig must be %s, kind %s", APIVersion, Kind)))
	}
	// The config's metadata is read by kustomize (kyaml) before the function runs, and its name,
	// labels and annotations go into the copy: they must be what an API server takes. A name that
	// is a list was taken, and the copy named sandbox-render.
	errs = append(errs, yamlread.MetadataProblems(map[string]any{"metadata": c.Metadata}, nil)...)
	// The render writes a copy of the config into its output under the config's name (Copies),
	// and the API server takes a SandboxRender, as any custom resource, only under a DNS-1123
	// subdomain: a/b rendered and was then refused.
	if name, ok := c.Metadata["name"].(string); ok && name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, "the render's output carries a copy of this config under its name: "+msg))
		}
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
	for i, r := range c.Spec.Resources {
		// Each is rendered as a listed item is, so it must be an object as every item must. An
		// empty one was taken by render and validate (which do not render spec.resources), a
		// configuration error of the function and a problem of the input in build; now it is a
		// configuration error in every mode, naming the field.
		at := spec.Child("resources").Index(i)
		if key, msg := yamlread.ObjectProblem(r); msg != "" {
			p := at.Child(key)
			if v, present := r[key]; key != "metadata" && (!present || v == nil) {
				errs = append(errs, field.Required(p, "every resource is an object, with apiVersion and kind"))
			} else {
				errs = append(errs, field.Invalid(p, v, msg))
			}
			continue
		}
		errs = append(errs, yamlread.MetadataProblems(r, at)...)
	}
	if n := c.Spec.MaxPoolReplicas; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("maxPoolReplicas"), *n, "must be 0 or more (0 means the default, 10000)"))
	}
	if n := c.Spec.ClaimReadyDeadlineSeconds; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("claimReadyDeadlineSeconds"), *n, "must be 0 or more (0 means the default, 600)"))
	}
	if n := c.Spec.MaxPoolMembers; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("maxPoolMembers"), *n, "must be 0 or more (0 means the default, 20000)"))
	}
	return errs
}

// Options are the render options the configuration asks for.
func (c *Config) Options() render.Options {
	o := render.Options{
		ClusterDomain:           c.Spec.ClusterDomain,
		Policies:                c.Spec.Policies,
		AllowedLabelDomains:     c.Spec.AllowedLabelDomains,
		DisableWarmPoolEviction: c.Spec.DisableWarmPoolEviction,
		MaxPoolReplicas:         ptr.Deref(c.Spec.MaxPoolReplicas, 0),
		MaxPoolMembers:          ptr.Deref(c.Spec.MaxPoolMembers, 0),
		ClaimReadyDeadline:      time.Duration(ptr.Deref(c.Spec.ClaimReadyDeadlineSeconds, 0)) * time.Second,
	}
	if c.Spec.Now != nil {
		t := c.Spec.Now.Time
		o.Now = &t
	}
	return o
}
