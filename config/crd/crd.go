// Package crd embeds the CustomResourceDefinitions generated from ./api by `make manifests`, so
// that render can default and validate input exactly as the API server would, and the tests can
// install the very same definitions into a real API server, conversion stanza included.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml patches/webhook_conversion.yaml
var files embed.FS

// Files is the generated CRD YAML, one file per kind, for callers that ship them as they are.
func Files() fs.FS {
	sub, err := fs.Sub(files, "bases")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// All returns the CRDs as config/crd installs them, sorted by name: the generated ones, the four
// agent-sandbox ones with the conversion stanza of patches/webhook_conversion.yaml, which sends
// v1alpha1 to the controller's webhook. TestAllIsConfigCRD holds it to `kustomize build config/crd`.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	b, err := files.ReadFile("patches/webhook_conversion.yaml")
	if err != nil {
		return nil, err
	}
	patch := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, patch); err != nil {
		return nil, fmt.Errorf("patches/webhook_conversion.yaml: %w", err)
	}
	crds, err := Generated()
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		if strings.HasSuffix(c.Spec.Group, "agents.x-k8s.io") { // as config/crd's patch target
			c.Spec.Conversion = patch.Spec.Conversion.DeepCopy()
		}
	}
	return crds, nil
}

// Generated returns the CRDs exactly as controller-gen wrote them, sorted by name.
func Generated() ([]*apiextensionsv1.CustomResourceDefinition, error) {
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
