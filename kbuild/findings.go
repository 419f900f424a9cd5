package kbuild

import (
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"

	"github.com/sandbox-gitops/sandbox-gitops/krm"
)

// placer names the files of a build's findings as the person who ran it named the tree. kustomize
// gives an object's file relative to the tree it builds (the origin annotation) and reads files by
// absolute path, symlinks resolved; render names a file as it was given. So a finding's file is
// the tree as given joined once with the path relative to it: w/template.yaml for the tree w,
// base/template.yaml for the file of a base ../base of the tree overlay.
type placer struct {
	// dir is the tree as given; roots are where kustomize reads it: dir made absolute, and with
	// its symlinks resolved. A remote tree has no roots: its paths are left as kustomize gives
	// them, relative to its repository.
	dir   string
	roots []string
}

func newPlacer(dir string) *placer {
	p := &placer{dir: dir}
	if strings.Contains(dir, "://") || strings.HasPrefix(dir, "git@") {
		return p
	}
	a := abs(dir)
	p.roots = []string{a}
	if r, err := filepath.EvalSymlinks(a); err == nil && r != a {
		p.roots = append(p.roots, r)
	}
	return p
}

// name is a path of the build as the person named the tree: an absolute path (a file kustomize
// read) relative to the tree when it lies in or beside it, a path relative to the tree (an origin)
// joined to the tree as given.
func (p *placer) name(path string) string {
	if len(p.roots) == 0 {
		return path
	}
	if !filepath.IsAbs(path) {
		return filepath.Join(p.dir, path)
	}
	// The shortest relative name wins: a tree reached through a symlink is read at its target.
	best := ""
	for _, root := range p.roots {
		if rel, err := filepath.Rel(root, path); err == nil && (best == "" || len(rel) < len(best)) {
			best = rel
		}
	}
	if best == "" {
		return path
	}
	return filepath.Join(p.dir, best)
}

// place returns copies of results with their files named (see name). Results of one object share
// their File and Tags, so they are copied, never changed in place: changing them in place joined
// the tree to the path once per finding (w/w/template.yaml).
func (p *placer) place(results framework.Results) framework.Results {
	out := make(framework.Results, len(results))
	for i, r := range results {
		c := *r
		if r.File != nil && r.File.Path != "" {
			c.File = &framework.File{Path: p.name(r.File.Path), Index: r.File.Index}
		}
		out[i] = &c
	}
	return out
}

// findings is the report of results: one line per result, as render writes its findings.
func (p *placer) findings(results framework.Results) *FindingsError {
	placed := p.place(results)
	return &FindingsError{Report: krm.Format(placed), Count: len(placed)}
}
