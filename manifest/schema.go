package manifest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// versionSchema is one served-or-not version of one of our CRDs, prepared the way the API
// server's apiextensions code prepares it: a structural schema for pruning and defaulting, and an
// OpenAPI validator.
type versionSchema struct {
	structural *structuralschema.Structural
	validator  apivalidation.SchemaCreateValidator
	// verdicts memoises schema validation by content (see validate).
	verdicts sync.Map
	size     atomic.Int64
}

// maxVerdicts bounds the memo: a few thousand distinct specs cover a large repository.
const maxVerdicts = 4096

// createValidator validates with one prebuilt kube-openapi validator. The API server's own
// constructor returns a ratcheting validator (its default feature gate) that builds a new
// validator for every object; ratcheting only matters for updates, and a render only creates.
type createValidator struct{ v *validate.SchemaValidator }

func (c createValidator) Validate(obj any, _ ...apivalidation.ValidationOption) *validate.Result {
	return c.v.Validate(obj)
}

// schemas is built once from the embedded CRDs; they are generated from ./api, so an error here
// is a build defect and every Decode reports it.
var schemas = sync.OnceValues(func() (map[schema.GroupVersionKind]*versionSchema, error) {
	crds, err := crd.All()
	if err != nil {
		return nil, err
	}
	out := map[schema.GroupVersionKind]*versionSchema{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("CRD %s version %s has no schema", c.Name, v.Name)
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", c.Name, v.Name, err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", c.Name, v.Name, err)
			}
			_, openapi, err := apivalidation.NewSchemaValidator(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", c.Name, v.Name, err)
			}
			validator := createValidator{validate.NewSchemaValidator(openapi, nil, "", strfmt.Default)}
			gvk := schema.GroupVersionKind{Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind}
			out[gvk] = &versionSchema{structural: s, validator: validator}
		}
	}
	return out, nil
})

// admit does to obj what the API server does to a custom resource on create: unknown fields are
// reported (kubectl's default strict field validation rejects them), CRD defaults are applied,
// and the result is validated against the OpenAPI schema (types, enums, formats, bounds,
// required fields). obj is modified in place.
func (vs *versionSchema) admit(obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	for _, p := range pruning.PruneWithOptions(obj, vs.structural, true, opts) {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: it is not in the schema (check its spelling and indentation)"))
	}
	defaulting.Default(obj, vs.structural)
	// kube-openapi reports errors in map order (metadata before or after spec); sorted, the same
	// input always reports the same errors in the same order.
	errs = append(errs, render.SortErrors(readable(vs.validate(obj), obj))...)
	// List sets and list maps must not repeat an item or a key (two ports 8080/TCP in a
	// container): the API server checks this apart from the OpenAPI schema, with this function.
	// The check walks the schema's properties in map order: sorted, the report is stable.
	for _, e := range render.SortErrors(listtype.ValidateListSetsAndMaps(nil, vs.structural, obj)) {
		if containerItem.MatchString(e.Field) {
			// Two containers of one name: render.ValidatePodTemplate says so on the name.
			continue
		}
		errs = append(errs, e)
	}
	return errs
}

// validate is the OpenAPI validation of obj, memoised by content. A CRD schema constrains
// everything but metadata (the API server validates object metadata apart), so the field errors
// of an object are a function of the object without its metadata; objects stamped from one
// template, which a large repository is mostly made of, are validated once. Validation is the
// costliest step of a large render.
func (vs *versionSchema) validate(obj map[string]any) field.ErrorList {
	if md, ok := obj["metadata"]; ok {
		if _, isMap := md.(map[string]any); !isMap {
			return apivalidation.ValidateCustomResource(nil, obj, vs.validator)
		}
	}
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			rest[k] = v
		}
	}
	key, err := json.Marshal(rest)
	if err != nil {
		return apivalidation.ValidateCustomResource(nil, obj, vs.validator)
	}
	if v, ok := vs.verdicts.Load(string(key)); ok {
		return v.(field.ErrorList)
	}
	errs := apivalidation.ValidateCustomResource(nil, obj, vs.validator)
	if vs.size.Add(1) <= maxVerdicts {
		vs.verdicts.Store(string(key), errs)
	}
	return errs
}

// containerItem is a container of a pod template, as the list-map check names a duplicate.
var containerItem = regexp.MustCompile(`^spec\.podTemplate\.spec\.(initContainers|containers|ephemeralContainers)\[\d+\]$`)

// typeDetail is kube-openapi's message for a value of the wrong type: "<path> in body must be of
// type <type>: "<Go type of the value>"".
var typeDetail = regexp.MustCompile(`in body must be of type ([a-z0-9-]+)`)

// formatOnly is kube-openapi's format check reported without a field: "Checked value must be of
// type integer with format int32 in spec.replicas".
var formatOnly = regexp.MustCompile(`^Checked value must be of type (\w+)(?: with format (\w+))? in (\S+)$`)

// readable rewrites the schema validator's messages into ones a user can act on: the value
// written instead of its Go type (Invalid value: "float64"), a field instead of <nil>, and one
// error per field. The errors are copies: validate memoises the originals.
func readable(errs field.ErrorList, obj map[string]any) field.ErrorList {
	byField := map[string]bool{}
	for _, e := range errs {
		if e.Field != "" && e.Field != "<nil>" {
			byField[e.Field] = true
		}
	}
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		c := *e
		if m := formatOnly.FindStringSubmatch(c.Detail); m != nil && (c.Field == "" || c.Field == "<nil>") {
			if byField[m[3]] {
				continue // the type error on that field says it already
			}
			c.Field, c.Detail = m[3], "must be "+typeWord(m[1], m[2])
			c.BadValue = valueAt(obj, m[3])
		} else if m := typeDetail.FindStringSubmatch(c.Detail); m != nil && (c.Type == field.ErrorTypeInvalid || c.Type == field.ErrorTypeTypeInvalid) {
			c.BadValue, c.Detail = valueAt(obj, c.Field), "must be "+typeWord(m[1], "")
		}
		out = append(out, &c)
	}
	return out
}

func typeWord(t, format string) string {
	switch {
	case t == "int32" || format == "int32":
		return "an integer (32-bit)"
	case t == "int64" || format == "int64" || t == "integer":
		return "an integer"
	case t == "number" || t == "float64":
		return "a number"
	case t == "boolean" || t == "bool":
		return "a boolean (true or false)"
	case t == "string":
		return "a string"
	case t == "date-time":
		return "an RFC 3339 date and time, such as 2026-01-02T15:04:05Z"
	case t == "array":
		return "a list"
	case t == "object":
		return "an object"
	}
	return "of type " + t
}

// valueAt finds the value at a field path such as spec.containers[0].ports[1].name or
// metadata.labels[app], for messages.
func valueAt(obj map[string]any, path string) any {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			m, ok := cur.(map[string]any)
			if !ok {
				return ""
			}
			cur = m[name]
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(after, "[")
			switch c := cur.(type) {
			case []any:
				i, err := strconv.Atoi(idx)
				if err != nil || i < 0 || i >= len(c) {
					return ""
				}
				cur = c[i]
			case map[string]any:
				cur = c[idx]
			default:
				return ""
			}
		}
	}
	switch cur.(type) {
	case map[string]any, []any:
		return describeValue(cur)
	}
	return cur
}
