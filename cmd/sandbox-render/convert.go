package main

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/migrate"
)

// convertSources converts the v1alpha1 sources of an expanded stream to v1beta1 (see
// migrate.Objects); a converted object keeps its file and counts as a source.
func (in *inputs) convertSources(out []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	converted, err := migrate.Objects(out)
	if err != nil {
		return nil, err
	}
	for i, o := range converted {
		if o != out[i] {
			in.source[o] = in.source[out[i]]
			in.files[o] = in.files[out[i]]
		}
	}
	return converted, nil
}
