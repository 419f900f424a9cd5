package kbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxFileStem bounds the part of an output file name before its hash suffix and ".yaml", so a
// name stays well under the 255 bytes every common filesystem allows.
const maxFileStem = 200

// fileKey is what an object's output file is named after: its namespace (empty when the
// directory has one namespace only), its group_version_kind and its name, all as the input
// spells them.
type fileKey struct {
	Namespace, GVK, Name string
}

func (k fileKey) String() string {
	s := k.GVK + " " + strconv.Quote(k.Name)
	if k.Namespace != "" {
		s += " in namespace " + strconv.Quote(k.Namespace)
	}
	return s
}

// outputFileNames names each object's file in an --output-dir directory. The name is
// `kustomize build -o DIR`'s, [<namespace>_]<group_version_kind>_<name>.yaml in lower case,
// whenever that is a plain file name; nothing an object's name or namespace holds can make it
// anything else:
//   - only a-z, 0-9, '.', '-' and '_' are kept; every other byte (path separators, control
//     characters, colons, non-ASCII) becomes '_', a dot after a dot becomes '_' (so no ".."), and
//     so does a leading dot (no hidden files, no "." or "..") or a trailing one (no "..yaml");
//   - the part before ".yaml" is cut to maxFileStem bytes;
//   - a name that had to change in any of these ways, or whose name or namespace has upper case,
//     gets "-" and the first 8 hex digits of the SHA-256 of its key as written (namespace, kind
//     and name joined by NUL bytes), and so do two objects whose names needed no change but would
//     share a file (kinds that differ only in case); so two objects never share a file, not even
//     on a case-insensitive filesystem, and the same objects always get the same names.
//
// A collision left after that (two keys whose hashes agree) is refused with both objects named
// rather than losing either.
func outputFileNames(keys []fileKey) ([]string, error) {
	plain := make([]string, len(keys))
	needsHash := make([]bool, len(keys))
	byName := map[string][]int{}
	for i, k := range keys {
		raw := k.GVK + "_" + k.Name
		if k.Namespace != "" {
			raw = k.Namespace + "_" + raw
		}
		safe := safeFileStem(raw)
		plain[i] = safe
		needsHash[i] = safe != strings.ToLower(raw) || len(raw) > maxFileStem ||
			k.Name != strings.ToLower(k.Name) || k.Namespace != strings.ToLower(k.Namespace)
		byName[safe] = append(byName[safe], i)
	}
	// Of objects that would share a file, one whose name needed no change keeps it; if several
	// did (kinds differing only in case), none does. Either way the outcome does not depend on
	// the order of the objects.
	for _, group := range byName {
		var clean []int
		for _, i := range group {
			if !needsHash[i] {
				clean = append(clean, i)
			}
		}
		if len(clean) > 1 {
			for _, i := range clean {
				needsHash[i] = true
			}
		}
	}
	names := make([]string, len(keys))
	owner := map[string]int{}
	for i, k := range keys {
		stem := plain[i]
		if len(stem) > maxFileStem {
			stem = stem[:maxFileStem]
		}
		if needsHash[i] {
			sum := sha256.Sum256([]byte(k.Namespace + "\x00" + k.GVK + "\x00" + k.Name))
			stem += "-" + hex.EncodeToString(sum[:4])
		}
		names[i] = stem + ".yaml"
		folded := strings.ToLower(names[i])
		if j, taken := owner[folded]; taken {
			return nil, &RefusedError{fmt.Sprintf("refusing to write %s and %s: both would be written to the file %s; rename one of them", keys[j], k, names[i])}
		}
		owner[folded] = i
	}
	return names, nil
}

// safeFileStem lower-cases s and replaces every byte that is not safe in a file name (see
// outputFileNames) with '_'.
func safeFileStem(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.' && i > 0 && b[i-1] != '.' && i < len(b)-1:
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// isPlainFileName tells whether name is one plain path element: not empty, no separator, no
// control character, not "." or "..", and not hidden (but for the marker itself). Every name
// WriteDir writes is one; so must be every name read back from a marker, since the marker's
// entries are the files a later run replaces or removes, and a marker is a file anyone can edit.
func isPlainFileName(name string) bool {
	if name == MarkerFile {
		return true
	}
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// resolveDir is dir with every symbolic link resolved, also when dir (or the end of its path)
// does not exist yet: the directory a write will really land in.
func resolveDir(dir string) (string, error) {
	a, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var rest []string
	for p := a; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !os.IsNotExist(err) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return a, nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// pathInside is the path of the file name in the (resolved) directory dir, once it is checked to
// stay there: name is one path element, and what is at the path now, if anything, is a regular
// file (never a symbolic link, which could point out of dir, nor a directory).
func pathInside(dir, name string) (string, error) {
	if !isPlainFileName(name) {
		return "", &RefusedError{fmt.Sprintf("refusing to write %s into %s: it is not a plain file name", strconv.Quote(name), dir)}
	}
	p := filepath.Join(dir, name)
	if filepath.Dir(p) != filepath.Clean(dir) {
		return "", &RefusedError{fmt.Sprintf("refusing to write %s: it is outside %s", p, dir)}
	}
	switch info, err := os.Lstat(p); {
	case os.IsNotExist(err):
		return p, nil
	case err != nil:
		return "", err
	case info.Mode()&os.ModeSymlink != 0:
		return "", &RefusedError{fmt.Sprintf("refusing to write %s: it is a symbolic link, which sandbox-render never writes through; remove it", p)}
	case !info.Mode().IsRegular():
		return "", &RefusedError{fmt.Sprintf("refusing to write %s: it is not a regular file; remove it", p)}
	}
	return p, nil
}
