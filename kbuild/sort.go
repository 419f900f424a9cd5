package kbuild

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"
)

// sortLegacy puts resources into kustomize's legacy output order (the default of kustomize
// build): by kind rank, then GVK, then namespace and name. kustomize's own sort re-adds every
// object to its resource map, a linear search each, so it is quadratic; this one computes each
// key once. The order of the kinds is not restated here: it is asked of kustomize itself, by
// building one placeholder object per kind present with the same sortOptions, so it cannot drift
// from the kustomize we link.
func sortLegacy(list []Object, sortOptions any) error {
	ids := make([]resid.ResId, len(list))
	kinds := map[resid.Gvk]bool{}
	for i, o := range list {
		ids[i] = o.ID
		kinds[ids[i].Gvk] = true
	}
	rank, err := kindOrder(kinds, sortOptions)
	if err != nil {
		return err
	}
	keys := make([]string, len(list))
	for i, id := range ids {
		keys[i] = legacyKey(id)
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ia, ib := idx[a], idx[b]
		if ra, rb := rank[ids[ia].Gvk], rank[ids[ib].Gvk]; ra != rb {
			return ra < rb
		}
		return keys[ia] < keys[ib]
	})
	sorted := make([]Object, len(list))
	for i, j := range idx {
		sorted[i] = list[j]
	}
	copy(list, sorted)
	return nil
}

// legacyKey is the string kustomize's legacy order compares objects of one kind by: the GVK,
// then the namespace and the name, with placeholders for empty ones.
func legacyKey(id resid.ResId) string {
	ns, name := id.Namespace, id.Name
	if ns == "" {
		ns = "~X"
	}
	if name == "" {
		name = "~N"
	}
	return id.Gvk.String() + "|" + ns + "|" + name
}

// kindOrder asks kustomize for the order of the given kinds.
func kindOrder(kinds map[resid.Gvk]bool, sortOptions any) (map[resid.Gvk]int, error) {
	fs := filesys.MakeFsInMemory()
	var objs strings.Builder
	for gvk := range kinds {
		fmt.Fprintf(&objs, "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: probe\n", gvk.ApiVersion(), gvk.Kind)
	}
	k := map[string]any{"resources": []string{"objects.yaml"}}
	if sortOptions != nil {
		k["sortOptions"] = sortOptions
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("/probe/kustomization.yaml", kb); err != nil {
		return nil, err
	}
	if err := fs.WriteFile("/probe/objects.yaml", []byte(objs.String())); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(opts).Run(fs, "/probe")
	if err != nil {
		return nil, fmt.Errorf("ordering the output: %w", err)
	}
	rank := make(map[resid.Gvk]int, len(kinds))
	for i, r := range m.Resources() {
		rank[r.GetGvk()] = i
	}
	if len(rank) != len(kinds) {
		return nil, fmt.Errorf("ordering the output: %d kinds, kustomize ordered %d", len(kinds), len(rank))
	}
	return rank, nil
}
