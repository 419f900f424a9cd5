// Package kbuild builds a kustomization in process with sigs.k8s.io/kustomize/api, exactly as
// `kustomize build --enable-alpha-plugins --enable-exec` does, so rendering a GitOps tree needs no
// kustomize binary and gives the same bytes. The sandbox-render function in the tree runs as this
// very executable, whatever path its config names; and the output can be written as one file per
// object for the rendered-manifests pattern (Flux, Argo CD without plugins).
package kbuild

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/krm"
)

// functionAnnotation carries a KRM function's runtime in its config.
const functionAnnotation = "config.kubernetes.io/function"

// Build builds the kustomization in dir with the options of `kustomize build --enable-alpha-plugins
// --enable-exec` (load restrictions RootOnly, no managed-by label, kustomize's default ordering).
// self is the executable that runs SandboxRender function configs.
func Build(dir, self string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	pc := types.EnabledPluginConfig(types.BploUseStaticallyLinked)
	pc.FnpLoadingOptions.EnableExec = true
	opts.PluginConfig = pc
	fs := selfFS{FileSystem: filesys.MakeFsOnDisk(), self: self}
	m, err := krusty.MakeKustomizer(opts).Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", dir, err)
	}
	return m, nil
}

// selfFS is the disk, except that SandboxRender function configs read through it name self as
// their exec path. Other files, and other functions, are read as they are.
type selfFS struct {
	filesys.FileSystem
	self string
}

func (f selfFS) ReadFile(path string) ([]byte, error) {
	b, err := f.FileSystem.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte(krm.Kind)) || !bytes.Contains(b, []byte(krm.APIVersion)) {
		return b, err
	}
	return rewriteExecPath(b, f.self)
}

func rewriteExecPath(b []byte, self string) ([]byte, error) {
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
	if err != nil {
		return b, nil // not ours to judge; kustomize will report it
	}
	changed := false
	for _, n := range nodes {
		if n.GetApiVersion() != krm.APIVersion || n.GetKind() != krm.Kind {
			continue
		}
		spec := n.GetAnnotations()[functionAnnotation]
		var fn struct {
			Exec map[string]any `json:"exec,omitempty"`
		}
		if spec == "" || yaml.Unmarshal([]byte(spec), &fn) != nil || fn.Exec == nil {
			continue
		}
		fn.Exec["path"] = self
		out, err := yaml.Marshal(fn)
		if err != nil {
			return nil, err
		}
		if _, err := n.Pipe(kyaml.SetAnnotation(functionAnnotation, string(out))); err != nil {
			return nil, err
		}
		changed = true
	}
	if !changed {
		return b, nil
	}
	var buf bytes.Buffer
	if err := (kio.ByteWriter{Writer: &buf}).Write(nodes); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteDir writes every object of m to its own file in dir, named as `kustomize build -o DIR`
// names them (<group_version_kind>_<name>.yaml, prefixed by the namespace when there are several),
// plus a kustomization.yaml listing them, so the directory is itself buildable by kustomize,
// Flux and Argo CD. YAML files already in dir are removed first, so an object deleted from Git
// does not linger. It returns the files written and removed.
func WriteDir(dir string, m resmap.ResMap) (written, removed []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	byNamespace := m.GroupedByCurrentNamespace()
	for ns, list := range byNamespace {
		for _, r := range list {
			name := fileName(r.GetGvk().StringWoEmptyField(), r.GetName())
			if len(byNamespace) > 1 {
				name = strings.ToLower(ns) + "_" + name
			}
			if files[name], err = r.AsYAML(); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, r := range m.ClusterScoped() {
		if files[fileName(r.GetGvk().StringWoEmptyField(), r.GetName())], err = r.AsYAML(); err != nil {
			return nil, nil, err
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n# Written by sandbox-render build --output-dir; do not edit.\nresources:\n"
	for _, n := range names {
		k += "- " + n + "\n"
	}
	files["kustomization.yaml"] = []byte(k)

	for _, o := range old {
		if _, keep := files[filepath.Base(o)]; keep {
			continue
		}
		if err := os.Remove(o); err != nil {
			return nil, nil, err
		}
		removed = append(removed, o)
	}
	names = append(names, "kustomization.yaml")
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return nil, nil, err
		}
		written = append(written, p)
	}
	return written, removed, nil
}

func fileName(gvk, name string) string {
	return strings.ToLower(gvk) + "_" + strings.ToLower(name) + ".yaml"
}
