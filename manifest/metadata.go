package manifest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// objectMetaFields are the keys of metav1.ObjectMeta as written in YAML.
var objectMetaFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[metav1.ObjectMeta]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// validateMetadata does to an agent-sandbox object's metadata what the API server does on create:
// an unknown metadata field, or field of an owner reference, is an error (strict field
// validation, as kubectl applies by default),
// fields of the wrong type are errors naming the field and the value, and the ObjectMeta is
// validated with apimachinery's own ValidateObjectMeta (names as DNS-1123 subdomains, namespaces
// as DNS-1123 labels, label keys and values, annotation keys and their 256 KiB total, owner
// references, finalizers). Custom resources are validated with NameIsDNSSubdomain
// (apiextensions-apiserver's customResourceStrategy). A namespace is checked when present: a
// GitOps tree often leaves it to kustomize.
func validateMetadata(obj map[string]any) (field.ErrorList, *metav1.ObjectMeta) {
	md := field.NewPath("metadata")
	raw, present := obj["metadata"]
	if !present || raw == nil {
		return field.ErrorList{field.Required(md.Child("name"), "")}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(md, describeValue(raw), "must be a mapping (name, namespace, labels, ...)")}, nil
	}
	var errs, unknown field.ErrorList
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := md.Child(k)
		if !objectMetaFields[k] {
			unknown = append(unknown, field.Forbidden(p, "unknown field: it is not in the object metadata (check its spelling and indentation)"))
			continue
		}
		switch k {
		case "name", "namespace", "generateName", "uid", "resourceVersion", "selfLink":
			if _, ok := m[k].(string); !ok && m[k] != nil {
				errs = append(errs, field.Invalid(p, m[k], "must be a string"))
			}
		case "creationTimestamp", "deletionTimestamp":
			if _, ok := m[k].(string); !ok && m[k] != nil {
				errs = append(errs, field.Invalid(p, shown(m[k]), "must be an RFC 3339 date and time, such as 2026-01-02T15:04:05Z"))
			}
		case "generation", "deletionGracePeriodSeconds":
			if _, ok := m[k].(int64); !ok && m[k] != nil {
				errs = append(errs, field.Invalid(p, shown(m[k]), "must be an integer"))
			}
		case "ownerReferences", "managedFields":
			l, ok := m[k].([]any)
			if !ok && m[k] != nil {
				errs = append(errs, field.Invalid(p, shown(m[k]), "must be a list of objects"))
			}
			for i, e := range l {
				ref, ok := e.(map[string]any)
				if !ok {
					errs = append(errs, field.Invalid(p.Index(i), shown(e), "must be an object"))
					continue
				}
				if k == "ownerReferences" {
					u, bad := ownerReference(ref, p.Index(i))
					unknown, errs = append(unknown, u...), append(errs, bad...)
				}
			}
		case "labels", "annotations":
			errs = append(errs, stringMap(m[k], p)...)
		case "finalizers":
			l, ok := m[k].([]any)
			if !ok && m[k] != nil {
				errs = append(errs, field.Invalid(p, m[k], "must be a list of strings"))
			}
			for i, e := range l {
				if _, ok := e.(string); !ok {
					errs = append(errs, field.Invalid(p.Index(i), shown(e), "must be a string"))
				}
			}
		}
	}
	if len(errs) > 0 {
		return append(unknown, errs...), nil
	}
	meta := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
		return append(unknown, field.Invalid(md, "", "cannot be read as object metadata; check the types of ownerReferences, generation and the timestamps")), nil
	}
	errs = apivalidation.ValidateObjectMeta(meta, meta.Namespace != "", apivalidation.NameIsDNSSubdomain, md)
	return append(unknown, render.SortErrors(errs)...), meta
}

// ownerReferenceFields are the keys of an owner reference as written in YAML, with the type each
// takes: "string" or "bool".
var ownerReferenceFields = func() map[string]string {
	out := map[string]string{}
	t := reflect.TypeFor[metav1.OwnerReference]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		kind := "string"
		if ft := t.Field(i).Type; ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Bool {
			kind = "bool"
		}
		out[name] = kind
	}
	return out
}()

// ownerReference checks the keys and the types of one owner reference: an unknown key is
// refused as the API server refuses it under strict field validation (kubectl's default), which
// the typed decoding would drop silently. The required fields (apiVersion, kind, name, uid) are
// ValidateObjectMeta's, once the types are right.
func ownerReference(ref map[string]any, p *field.Path) (unknown, errs field.ErrorList) {
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := ref[k]; ownerReferenceFields[k] {
		case "":
			unknown = append(unknown, field.Forbidden(p.Child(k), "unknown field: it is not in an owner reference (apiVersion, kind, name, uid, controller, blockOwnerDeletion)"))
		case "string":
			if _, ok := v.(string); !ok && v != nil {
				errs = append(errs, field.Invalid(p.Child(k), shown(v), "must be a string"))
			}
		case "bool":
			if _, ok := v.(bool); !ok && v != nil {
				errs = append(errs, field.Invalid(p.Child(k), shown(v), "must be a boolean (true or false)"))
			}
		}
	}
	return unknown, errs
}

func stringMap(v any, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(p, shown(v), "must be a mapping of strings to strings")}
	}
	var errs field.ErrorList
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
		case nil:
			errs = append(errs, field.Invalid(p.Key(k), v, `must be a string; write "" for an empty value`))
		case bool, int64, float64:
			errs = append(errs, field.Invalid(p.Key(k), v, fmt.Sprintf("must be a string; quote it: %q", fmt.Sprint(v))))
		default:
			errs = append(errs, field.Invalid(p.Key(k), shown(v), "must be a string"))
		}
	}
	return errs
}

// shown is a value as a message shows it: scalars as they are, lists and mappings by what they
// are (never Go's rendering of a map).
func shown(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return describeValue(v)
	}
	return v
}
