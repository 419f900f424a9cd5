// Package goldencase reads a golden case (golden/testdata/<kind>/<case>): its config.yaml and
// its input manifests. It is the one reader, shared by the golden tests and the controller's
// preview == reality test, so that both read a case the same way.
package goldencase

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/policies"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

// Config is a case's config.yaml. It is exported so that the controller's preview == reality
// test reads a case exactly as the golden harness does: a second reading of the same file would
// drift from this one (it once dropped disableWarmPoolEviction).
type Config struct {
	// ClusterDomain is passed to render.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// Now is the time of a controller pass, or the moment a render case previews.
	Now *metav1.Time `json:"now,omitempty"`
	// Adopt names warm Sandboxes to be adopted by claims (plan cases only): claim name → Sandbox
	// name, in the namespace of the claim.
	Adopt map[string]string `json:"adopt,omitempty"`
	// Arrival is the order the controller's informer listed the pools' members in, first first
	// (plan cases only; render.ClaimFound.Arrival): it tells apart members created in the same
	// second. Members it does not name rank after those it does.
	Arrival []string `json:"arrival,omitempty"`
	// Options are render options: policies, allowed label domains, warm pool eviction.
	Options *Options `json:"options,omitempty"`
	// KeepSourceVersions writes v1alpha1 sources as they are instead of converted to v1beta1.
	KeepSourceVersions bool `json:"keepSourceVersions,omitempty"`
}

// Options is the subset of render.Options a case can set.
type Options struct {
	Policies                policies.Config `json:"policies,omitempty"`
	AllowedLabelDomains     []string        `json:"allowedLabelDomains,omitempty"`
	DisableWarmPoolEviction bool            `json:"disableWarmPoolEviction,omitempty"`
}

// RenderOptions are the render options the case runs with.
func (c Config) RenderOptions() render.Options {
	o := render.Options{ClusterDomain: c.ClusterDomain}
	if c.Now != nil {
		o.Now = &c.Now.Time
	}
	if c.Options != nil {
		o.Policies = c.Options.Policies
		o.AllowedLabelDomains = c.Options.AllowedLabelDomains
		o.DisableWarmPoolEviction = c.Options.DisableWarmPoolEviction
	}
	return o
}

// FunctionConfig is the case's config as the SandboxRender functionConfig a tree would hold:
// what the function reads, and, through renderconfig's Copies, what the cluster gets.
func (c Config) FunctionConfig() []byte {
	spec := map[string]any{}
	if c.ClusterDomain != "" {
		spec["clusterDomain"] = c.ClusterDomain
	}
	if c.Now != nil {
		spec["now"] = c.Now
	}
	if c.KeepSourceVersions {
		spec["keepSourceVersions"] = true
	}
	if o := c.Options; o != nil {
		spec["policies"] = o.Policies
		if o.AllowedLabelDomains != nil {
			spec["allowedLabelDomains"] = o.AllowedLabelDomains
		}
		if o.DisableWarmPoolEviction {
			spec["disableWarmPoolEviction"] = true
		}
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": renderconfig.APIVersion, "kind": renderconfig.Kind,
		"metadata": map[string]any{"name": "case"}, "spec": spec})
	if err != nil {
		panic(err) // plain values: marshalling cannot fail
	}
	return b
}

// ReadConfig reads dir/config.yaml strictly (an unknown key is an error); a case without one
// has the zero config.
func ReadConfig(dir string) (Config, error) {
	cfg := Config{}
	b, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if os.IsNotExist(err) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", filepath.Join(dir, "config.yaml"), err)
	}
	return cfg, nil
}

// ReadInputs reads every *.yaml of a case except its expectations and config, in file name
// order, with the reader every mode of the CLI uses.
func ReadInputs(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		switch filepath.Base(f) {
		case "expected.yaml", "config.yaml":
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		o, err := manifest.Parse(filepath.Base(f), b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, o...)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s has no input objects", dir)
	}
	return objs, nil
}
