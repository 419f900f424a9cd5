package renderconfig

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unknownDetail leads the detail of the field error for a field the configuration does not have;
// Parse words it as "unknown field `path`", followed by the rest of the detail (a suggestion).
const unknownDetail = "unknown field"

// unknownFields are the fields of v, a value decoded from YAML, that the Go type t does not have,
// as encoding/json names them (case matters: the config is written by people, and a key that
// differs in case is a typo that encoding/json alone would take). Each error suggests the closest
// field t has there, when one is close (suggest). Values of the wrong type are left to the
// decoding, which names the type expected; a type that decodes itself (metav1.Time) and a value
// of any type (metadata, spec.resources) take any field.
func unknownFields(v any, t reflect.Type, path *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	var errs field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		names, types := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, known := types[k]
			if !known {
				errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: child(path, k).String(),
					BadValue: "", Detail: unknownDetail + suggest(k, names)})
				continue
			}
			errs = append(errs, unknownFields(m[k], ft, child(path, k))...)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range sortedKeys(m) {
			errs = append(errs, unknownFields(m[k], t.Elem(), path.Key(k))...)
		}
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, item := range l {
			errs = append(errs, unknownFields(item, t.Elem(), path.Index(i))...)
		}
	}
	return errs
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// child is path's child name; the root of the object when path is nil.
func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonFields are the fields of a struct as encoding/json names them, in the order they are
// declared (embedded structs without a name of their own inlined, as encoding/json inlines them),
// and their types.
func jsonFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	types := map[string]reflect.Type{}
	var add func(reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			switch {
			case name == "-" || (!f.IsExported() && !f.Anonymous):
				continue
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				add(f.Type)
				continue
			case name == "":
				name = f.Name
			}
			names = append(names, name)
			types[name] = f.Type
		}
	}
	add(t)
	return names, types
}

// suggest is " (did you mean `name`?)" for the known field closest to the one written, when one
// is close: within an edit distance of a third of its length (at least 1; a swap of two letters is
// one edit), ignoring case, or when one begins with the other (dnsMode for dns). "" when none is.
// The first in declaration order wins a tie, so the message is stable.
func suggest(written string, known []string) string {
	if len(written) > maxSuggested {
		return "" // no field is that long, and distance's table grows with the key
	}
	w := strings.ToLower(written)
	best, bestDistance := "", -1
	for _, k := range known {
		kl := strings.ToLower(k)
		d := distance(w, kl)
		limit := max(1, len(w)/3)
		prefix := min(len(w), len(kl)) >= 3 && (strings.HasPrefix(w, kl) || strings.HasPrefix(kl, w))
		if d > limit && !prefix {
			continue
		}
		if bestDistance < 0 || d < bestDistance {
			best, bestDistance = k, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean `" + best + "`?)"
}

// maxSuggested is the longest key suggest compares, in bytes: far above every field name, and
// it keeps a mistyped key of megabytes from costing megabytes of distance table per known name.
const maxSuggested = 256

// distance is the optimal string alignment distance between a and b: insertions, deletions,
// substitutions and swaps of two adjacent letters, each one edit.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
