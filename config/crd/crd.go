// Package crd embeds the CustomResourceDefinitions generated from ./api by `make manifests`, so
// that render can default and validate input exactly as the API server would, and the tests can
// install the very same definitions into a real API server.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var files embed.FS

// Files is the generated CRD YAML, one file per kind, for callers that ship them as they are.
func Files() fs.FS {
	sub, err := fs.Sub(files, "bases")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// All returns the generated CRDs, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
