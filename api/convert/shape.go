package convert

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The helpers in this file are the shapes the conversions in both directions share, written once
// so that each conversion says only its rule. Everything they return is a copy: an object of one
// version never shares memory with the object it was converted from.

// typeMeta is the apiVersion and kind a converted object carries.
func typeMeta(gv schema.GroupVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gv.String(), Kind: kind}
}

// convertEach converts every element of a list. None stays none and an empty list stays empty.
func convertEach[S, T any](in []S, convert func(*S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = convert(&in[i])
	}
	return out
}

// convertPtr converts an optional struct: unset stays unset.
func convertPtr[S, T any](in *S, convert func(*S) T) *T {
	if in == nil {
		return nil
	}
	out := convert(in)
	return &out
}

// clone copies an optional value: unset stays unset.
func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
