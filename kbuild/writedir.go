package kbuild

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/resid"
)

// MarkerFile lists, one name a line, the files sandbox-render build --output-dir wrote into a
// directory. Only the files it lists are ever replaced or removed; a directory holding anything
// else is refused.
const MarkerFile = ".sandbox-render-output"

const markerHeader = "# Files written by sandbox-render build --output-dir; it removes or replaces only these.\n"

// RefusedError is an output path sandbox-render will not write to; the message says what to do.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// CheckOutputDir refuses an output directory that is not sandbox-render's to write: one that
// holds a file the build read (the kustomization's own tree), or files that an earlier
// --output-dir run did not write.
func CheckOutputDir(dir string, sources []string) error {
	a, err := resolveDir(dir)
	if err != nil {
		return err
	}
	for _, s := range sources {
		if r, err := filepath.EvalSymlinks(s); err == nil {
			s = r
		}
		if rel, err := filepath.Rel(a, s); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return &RefusedError{fmt.Sprintf("refusing to write into %s: it holds the sources of the build (%s); choose a directory outside the kustomization's tree, such as deploy/<name>", dir, s)}
		}
	}
	entries, err := os.ReadDir(a)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	owned, err := readMarker(a)
	if err != nil {
		return err
	}
	var foreign []string
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			return &RefusedError{fmt.Sprintf("refusing to write into %s: %s is a symbolic link, and sandbox-render writes only regular files of its own there; remove it", dir, strconv.Quote(e.Name()))}
		}
		if e.Name() == MarkerFile {
			continue
		}
		if e.IsDir() || !owned[e.Name()] {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) > 0 {
		shown := foreign
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(foreign)-5))
		}
		return &RefusedError{fmt.Sprintf("refusing to write into %s: it holds files sandbox-render did not write (%s); move them away, or choose an empty or new directory (sandbox-render lists what it writes in %s)",
			dir, strings.Join(shown, ", "), MarkerFile)}
	}
	return nil
}

func readMarker(dir string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if os.IsNotExist(err) {
		return legacyOwned(dir), nil
	}
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, "#") && isPlainFileName(l) {
			owned[l] = true
		}
	}
	return owned, sc.Err()
}

// legacyOwned is what a directory written before the marker existed says it holds: the
// kustomization.yaml with the header --output-dir writes, and the files it lists.
func legacyOwned(dir string) map[string]bool {
	owned := map[string]bool{}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil || !bytes.Contains(b, []byte(legacyHeader)) {
		return owned
	}
	owned["kustomization.yaml"] = true
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(l, "- "); ok && isPlainFileName(n) && strings.HasSuffix(n, ".yaml") {
			owned[n] = true
		}
	}
	return owned
}

const legacyHeader = "# Written by sandbox-render build --output-dir; do not edit."

// WriteDir writes every object of r to its own file in dir, named as `kustomize build -o DIR`
// names them (<group_version_kind>_<name>.yaml, prefixed by the namespace when there are several)
// wherever that is a plain file name, and made one otherwise (outputFileNames), plus a
// kustomization.yaml listing them, so the directory is itself buildable by kustomize,
// Flux and Argo CD. Files an earlier WriteDir wrote and this one does not are removed, so an
// object deleted from Git does not linger. It refuses (CheckOutputDir) a directory holding
// anything else. It returns the files written and removed.
func WriteDir(dir string, r *Result) (written, removed []string, err error) {
	if err := CheckOutputDir(dir, r.Sources); err != nil {
		return nil, nil, err
	}
	// Every write goes to the directory the path resolves to now, checked once (pathInside
	// refuses a symbolic link in it), so nothing written follows a link out of it.
	into, err := resolveDir(dir)
	if err != nil {
		return nil, nil, err
	}
	owned, err := readMarker(into)
	if err != nil {
		return nil, nil, err
	}
	files, names, err := dirFiles(r)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		return nil, nil, err
	}
	// The marker first, listing the old and the new files: an interrupted run leaves a
	// directory the next run may still clean.
	all := map[string]bool{}
	for n := range owned {
		all[n] = true
	}
	for _, n := range names {
		all[n] = true
	}
	if err := writeMarker(into, all); err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		p, err := pathInside(into, n)
		if err != nil {
			return nil, nil, err
		}
		if err := writeFileAtomic(p, files[n]); err != nil {
			return nil, nil, err
		}
		written = append(written, filepath.Join(dir, n))
	}
	var stale []string
	for n := range owned {
		if _, keep := files[n]; !keep {
			stale = append(stale, n)
		}
	}
	sort.Strings(stale)
	for _, n := range stale {
		p, err := pathInside(into, n)
		if err != nil {
			return nil, nil, err
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		removed = append(removed, filepath.Join(dir, n))
	}
	final := map[string]bool{}
	for _, n := range names {
		final[n] = true
	}
	return written, removed, writeMarker(into, final)
}

// dirFiles are the files WriteDir writes for r, by name: one per object, named by
// outputFileNames (with the namespace only when r has several), and the kustomization.yaml
// listing them; names are the files in the order written, the kustomization last.
func dirFiles(r *Result) (files map[string][]byte, names []string, err error) {
	docs, err := r.documents()
	if err != nil {
		return nil, nil, err
	}
	namespaces := map[string]bool{}
	for _, o := range r.Objects {
		if ns := o.ID.EffectiveNamespace(); ns != resid.TotallyNotANamespace {
			namespaces[ns] = true
		}
	}
	keys := make([]fileKey, len(r.Objects))
	for i, o := range r.Objects {
		keys[i] = fileKey{GVK: o.ID.Gvk.StringWoEmptyField(), Name: o.ID.Name}
		if ns := o.ID.EffectiveNamespace(); ns != resid.TotallyNotANamespace && len(namespaces) > 1 {
			keys[i].Namespace = ns
		}
	}
	fileNames, err := outputFileNames(keys)
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{}
	for i, n := range fileNames {
		files[n] = docs[i]
	}
	names = make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n# Written by sandbox-render build --output-dir; do not edit.\nresources:\n"
	for _, n := range names {
		k += "- " + n + "\n"
	}
	files["kustomization.yaml"] = []byte(k)
	names = append(names, "kustomization.yaml")
	return files, names, nil
}

func writeMarker(dir string, names map[string]bool) error {
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	p, err := pathInside(dir, MarkerFile)
	if err != nil {
		return err
	}
	return writeFileAtomic(p, []byte(markerHeader+strings.Join(list, "\n")+"\n"))
}

// writeFileAtomic writes through a temporary file renamed into place, so a reader never sees
// half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// OutputFileHeader starts every file build --output writes; an existing file is replaced only
// when it starts with it.
const OutputFileHeader = "# Written by sandbox-render build; do not edit.\n"

// WriteFile writes the build's YAML stream to path as a file. It refuses a directory, a file the
// build read, and an existing file it did not write.
func WriteFile(path string, r *Result) error {
	a := abs(path)
	for _, s := range r.Sources {
		if s == a {
			return &RefusedError{fmt.Sprintf("refusing to write %s: it is a source of the build", path)}
		}
	}
	switch info, err := os.Stat(path); {
	case err == nil && info.IsDir():
		return &RefusedError{fmt.Sprintf("refusing to write %s: it is a directory; use --output-dir to write one file per object", path)}
	case err == nil:
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(old, []byte(OutputFileHeader)) {
			return &RefusedError{fmt.Sprintf("refusing to overwrite %s: sandbox-render did not write it; remove it first or choose another path", path)}
		}
	case !os.IsNotExist(err):
		return err
	}
	b, err := r.YAML()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append([]byte(OutputFileHeader), b...))
}
