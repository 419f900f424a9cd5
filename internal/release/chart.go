package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// ChartDir is the Helm chart a release packages, relative to the repository root.
const ChartDir = "charts/sandbox-gitops"

// Chart packages the chart at root/ChartDir for the release, as `helm package --version
// --app-version` would after setting the image in values.yaml:
//
//   - Chart.yaml's version is the release's without its v (the semver a chart version is by
//     Helm's convention, and the archive's name: <name>-<version>.tgz), its appVersion the
//     release's version, the controller image's tag;
//   - values.yaml's image.repository, image.tag and image.digest are those of the release's
//     image whose Name is the chart's default image.repository, so the chart installs
//     repository:tag@digest, byte for byte the reference install.yaml pins.
//
// Only those scalars change: each is replaced where it stands in the file, so the comments and
// layout a user reads with `helm show values` stay the source chart's. The archive is
// deterministic: entries in lexical order under <name>/, each a regular file with mode 0644, no
// owner, and mtime as its time (the commit's, as the images' timestamps are).
func Chart(root, version string, images []Image, mtime time.Time) (file string, tgz []byte, err error) {
	dir := filepath.Join(root, filepath.FromSlash(ChartDir))
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return "", nil, err
	}
	valuesYAML, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return "", nil, err
	}
	name, err := scalar(chartYAML, "name")
	if err != nil {
		return "", nil, fmt.Errorf("%s/Chart.yaml: %w", ChartDir, err)
	}
	repo, err := scalar(valuesYAML, "image", "repository")
	if err != nil {
		return "", nil, fmt.Errorf("%s/values.yaml: %w", ChartDir, err)
	}
	var img *Image
	for i := range images {
		if images[i].Name == repo {
			img = &images[i]
		}
	}
	if img == nil {
		return "", nil, fmt.Errorf("%s/values.yaml: image.repository %s is none of the release's images", ChartDir, repo)
	}
	chartVersion := strings.TrimPrefix(version, "v")
	edited := map[string][]byte{}
	if edited["Chart.yaml"], err = setScalars(chartYAML, map[string]string{"version": chartVersion, "appVersion": version}); err != nil {
		return "", nil, fmt.Errorf("%s/Chart.yaml: %w", ChartDir, err)
	}
	if edited["values.yaml"], err = setScalars(valuesYAML, map[string]string{
		"image.repository": img.Repository, "image.tag": img.Tag, "image.digest": img.Digest,
	}); err != nil {
		return "", nil, fmt.Errorf("%s/values.yaml: %w", ChartDir, err)
	}

	tgz, err = archive(dir, name, edited, mtime)
	if err != nil {
		return "", nil, err
	}
	return name + "-" + chartVersion + ".tgz", tgz, nil
}

// archive is the chart in dir as `helm package` archives it, deterministically: every file
// Helm does not ignore, under name/, the edited ones as edited, each with mode 0644 and mtime.
func archive(dir, name string, edited map[string][]byte, mtime time.Time) ([]byte, error) {
	ignore, err := readHelmignore(dir)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // no name, no mtime in the gzip header
	tw := tar.NewWriter(zw)
	err = fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && ignored(ignore, path.Base(p)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s/%s: not a regular file; a chart holds files only", ChartDir, p)
		}
		b, ok := edited[p]
		if !ok {
			if b, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
				return err
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(name, p), Size: int64(len(b)), Mode: 0o644, ModTime: mtime.UTC()}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readHelmignore reads the chart's .helmignore, the files `helm package` leaves out: the
// patterns that match a file or directory by its name at any depth (`*.swp`), which is all the
// chart's holds. A pattern Helm reads otherwise (with a /, a ! or **) is refused rather than
// packaged differently from Helm.
func readHelmignore(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var patterns []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, "/!") || strings.Contains(line, "**") {
			return nil, fmt.Errorf("%s/.helmignore:%d: %q: only patterns of a name (no /, ! or **) are supported by the release's packaging", ChartDir, i+1, line)
		}
		if _, err := path.Match(line, ""); err != nil {
			return nil, fmt.Errorf("%s/.helmignore:%d: %q: %w", ChartDir, i+1, line, err)
		}
		patterns = append(patterns, line)
	}
	return patterns, nil
}

func ignored(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// scalar is the string value of the scalar at the path of mapping keys.
func scalar(src []byte, keys ...string) (string, error) {
	n, err := lookupScalar(src, keys)
	if err != nil {
		return "", err
	}
	return n.Value, nil
}

func lookupScalar(src []byte, keys []string) (*kyaml.Node, error) {
	doc, err := kyaml.Parse(string(src))
	if err != nil {
		return nil, err
	}
	rn, err := doc.Pipe(kyaml.Lookup(keys...))
	if err != nil {
		return nil, err
	}
	if rn == nil || rn.YNode().Kind != kyaml.ScalarNode {
		return nil, fmt.Errorf("%s: not a scalar", strings.Join(keys, "."))
	}
	return rn.YNode(), nil
}

// setScalars replaces the scalars at the dotted paths with double-quoted values, each where it
// stands in src, and leaves every other byte alone; then it parses the result and checks that
// each path holds its new value. A scalar must be on one line, plain or quoted.
func setScalars(src []byte, values map[string]string) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	for p, v := range values {
		n, err := lookupScalar(src, strings.Split(p, "."))
		if err != nil {
			return nil, err
		}
		if n.Line < 1 || n.Line > len(lines) || n.Column < 1 {
			return nil, fmt.Errorf("%s: no position in the file", p)
		}
		line := []rune(lines[n.Line-1])
		start := n.Column - 1
		end, err := scalarEnd(line, start, n.Style)
		if err != nil {
			return nil, fmt.Errorf("%s (line %d): %w", p, n.Line, err)
		}
		lines[n.Line-1] = string(line[:start]) + strconv.Quote(v) + string(line[end:])
	}
	out := []byte(strings.Join(lines, ""))
	for p, v := range values {
		got, err := scalar(out, strings.Split(p, ".")...)
		if err != nil {
			return nil, fmt.Errorf("%s after setting it: %w", p, err)
		}
		if got != v {
			return nil, fmt.Errorf("%s is %q after setting it to %q", p, got, v)
		}
	}
	return out, nil
}

// scalarEnd is the index in line just past the scalar token that begins at start.
func scalarEnd(line []rune, start int, style kyaml.Style) (int, error) {
	if start >= len(line) {
		return 0, errors.New("the scalar starts past the end of its line")
	}
	switch {
	case style&kyaml.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case style&kyaml.SingleQuotedStyle != 0:
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
	case style&(kyaml.LiteralStyle|kyaml.FoldedStyle) == 0:
		end := len(line)
		if i := strings.Index(string(line[start:]), " #"); i >= 0 {
			end = start + len([]rune(string(line[start:])[:i]))
		}
		for end > start && strings.ContainsRune(" \t\r\n", line[end-1]) {
			end--
		}
		return end, nil
	}
	return 0, errors.New("not a one-line plain or quoted scalar")
}
