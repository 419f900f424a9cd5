// Package manifest is the edge between YAML and the typed API: it splits YAML streams into
// objects, turns v1alpha1 objects into v1beta1, applies the CRD defaults and schema validation
// the API server would apply, and writes objects back as canonical YAML. It is pure: it reads
// bytes given to it and returns bytes.
package manifest

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// Encode writes objects as one YAML stream, each document separated by "---". Keys are sorted
// (EncodeObject), so the bytes depend only on the objects and their order.
func Encode(objs []*unstructured.Unstructured) ([]byte, error) {
	return EncodeKeeping(objs, nil)
}

// EncodeKeeping is Encode, except that an object found in sources is written as its text there:
// the document as it was read (Document.Text), so objects a render passes through come out byte
// for byte, comments, quoting and key order included.
func EncodeKeeping(objs []*unstructured.Unstructured, sources map[*unstructured.Unstructured][]byte) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		b, kept := sources[o]
		if !kept {
			var err error
			if b, err = EncodeObject(o.Object); err != nil {
				return nil, fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// EncodeObject writes one object as YAML that the one reader (YAML 1.2) and YAML 1.1 readers
// both read back as the same object: keys sorted, strings quoted when they would read as
// anything else under either (58130e46, 0o17, yes). sigs.k8s.io/yaml's YAML 1.1 encoder left
// 0o17 and 0b1 style strings plain, which YAML 1.2 reads as numbers.
func EncodeObject(obj map[string]any) ([]byte, error) {
	if b, ok := appendYAML(nil, obj); ok {
		return b, nil
	}
	return encodeGoYAML(obj)
}

// encodeGoYAML is EncodeObject through go-yaml itself: the reference appendYAML matches, and
// its fallback for what appendYAML does not cover.
func encodeGoYAML(obj map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := kyaml.NewEncoder(&buf)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SortCanonical orders objects by kind, then namespace, then name: the order of every rendered
// output and golden file, so output never depends on input order.
func SortCanonical(objs []*unstructured.Unstructured) {
	keys := make([]CanonicalKey, len(objs))
	for i, o := range objs {
		keys[i] = KeyOf(o)
	}
	SortByKeys(objs, keys)
}

// SortByKeys orders items stably by keys[i], the key of items[i], moving both together: for
// lists of what is not yet an object (entries of a bundle) whose order must be SortCanonical's.
func SortByKeys[T any](items []T, keys []CanonicalKey) {
	sort.Stable(byKey[T]{items, keys})
}

// CanonicalKey is what SortCanonical orders by: kind, namespace, name, then apiVersion.
type CanonicalKey struct {
	Kind, Namespace, Name, APIVersion string
}

// KeyOf is an object's CanonicalKey.
func KeyOf(o *unstructured.Unstructured) CanonicalKey {
	return CanonicalKey{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), APIVersion: o.GetAPIVersion()}
}

// Compare orders two keys as SortCanonical does.
func (k CanonicalKey) Compare(o CanonicalKey) int {
	if c := strings.Compare(k.Kind, o.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(k.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(k.Name, o.Name); c != 0 {
		return c
	}
	return strings.Compare(k.APIVersion, o.APIVersion)
}

type byKey[T any] struct {
	items []T
	keys  []CanonicalKey
}

func (b byKey[T]) Len() int           { return len(b.items) }
func (b byKey[T]) Less(i, j int) bool { return b.keys[i].Compare(b.keys[j]) < 0 }
func (b byKey[T]) Swap(i, j int) {
	b.items[i], b.items[j] = b.items[j], b.items[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}
