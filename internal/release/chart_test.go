package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// untar returns the archive's files by name, and their names in archive order.
func untar(t *testing.T, tgz []byte) (map[string]string, []string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, order
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(1780000000, 0)) {
			t.Errorf("%s: type %c, mode %o, uid %d %q, mtime %v; want a regular file, 0644, no owner, the commit's time", h.Name, h.Typeflag, h.Mode, h.Uid, h.Uname, h.ModTime)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
		order = append(order, h.Name)
	}
}

// TestChart: the packaged chart is every file of charts/sandbox-gitops under sandbox-gitops/,
// with the release's version and appVersion in Chart.yaml and the controller image pinned in
// values.yaml, and no other byte changed; packaging twice gives the same archive.
func TestChart(t *testing.T) {
	root := testenv.RepoRoot()
	d := "sha256:" + strings.Repeat("cd", 32)
	images := []Image{
		{Name: DefaultRegistry + "/sandbox-router", Repository: "registry.example/x/sandbox-router", Tag: "v0.2.0-rc.1", Digest: "sha256:" + strings.Repeat("00", 32)},
		{Name: DefaultRegistry + "/sandbox-controller", Repository: "registry.example/x/sandbox-controller", Tag: "v0.2.0-rc.1", Digest: d},
	}
	mtime := time.Unix(1780000000, 0)
	file, tgz, err := Chart(root, "v0.2.0-rc.1", images, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if file != "sandbox-gitops-0.2.0-rc.1.tgz" {
		t.Errorf("file %q, want sandbox-gitops-0.2.0-rc.1.tgz", file)
	}
	_, again, err := Chart(root, "v0.2.0-rc.1", images, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tgz, again) {
		t.Error("two packagings of the same tree differ")
	}

	files, order := untar(t, tgz)
	if !slices.IsSorted(order) {
		t.Errorf("entries not in lexical order: %v", order)
	}
	dir := filepath.Join(root, filepath.FromSlash(ChartDir))
	ignore, err := readHelmignore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	err = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !ignored(ignore, e.Name()) {
			rel, _ := filepath.Rel(dir, p)
			want = append(want, "sandbox-gitops/"+filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("entries (-chart dir +archive):\n%s", diff)
	}

	// What changed in each file, as (source line, packaged line) pairs.
	changed := map[string][][2]string{
		"Chart.yaml": {{"version: 0.1.0", `version: "0.2.0-rc.1"`}, {"appVersion: latest", `appVersion: "v0.2.0-rc.1"`}},
		"values.yaml": {
			{"  repository: ghcr.io/sandbox-gitops/sandbox-controller", `  repository: "registry.example/x/sandbox-controller"`},
			{`  tag: ""`, `  tag: "v0.2.0-rc.1"`},
			{`  digest: ""`, `  digest: "` + d + `"`},
		},
	}
	for _, name := range want {
		rel := strings.TrimPrefix(name, "sandbox-gitops/")
		src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		var got [][2]string
		srcLines, pkgLines := strings.Split(string(src), "\n"), strings.Split(files[name], "\n")
		if len(srcLines) != len(pkgLines) {
			t.Errorf("%s: %d lines, the source has %d", rel, len(pkgLines), len(srcLines))
			continue
		}
		for i := range srcLines {
			if srcLines[i] != pkgLines[i] {
				got = append(got, [2]string{srcLines[i], pkgLines[i]})
			}
		}
		if diff := cmp.Diff(changed[rel], got); diff != "" {
			t.Errorf("%s: changed lines (-want +got):\n%s", rel, diff)
		}
	}
}

// TestChartNeedsTheControllerImage: a release without the image the chart's values name is
// refused, naming the value.
func TestChartNeedsTheControllerImage(t *testing.T) {
	_, _, err := Chart(testenv.RepoRoot(), "v0.1.0", []Image{{Name: DefaultRegistry + "/sandbox-router"}}, time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "image.repository ghcr.io/sandbox-gitops/sandbox-controller") {
		t.Errorf("error %v, want one naming image.repository and its value", err)
	}
}

// TestHelmignore: the chart's .helmignore patterns leave out files by name, at any depth, as
// helm package does; the patterns the packaging does not implement are refused.
func TestHelmignore(t *testing.T) {
	cases := map[string]struct {
		reason     string
		helmignore string
		ignored    []string
		kept       []string
		wantErr    bool
	}{
		"names": {reason: "comments and blank lines skipped; a name pattern matches at any depth",
			helmignore: "# editors\n\n*.swp\n.DS_Store\n", ignored: []string{"a.swp", ".DS_Store"}, kept: []string{"values.yaml", ".helmignore"}},
		"none":     {reason: "no .helmignore leaves nothing out", kept: []string{"a.swp"}},
		"a path":   {reason: "Helm anchors a pattern with a /", helmignore: "templates/*.bak\n", wantErr: true},
		"negation": {reason: "Helm's ! re-includes", helmignore: "*.yaml\n!values.yaml\n", wantErr: true},
		"bad glob": {reason: "path.Match refuses it", helmignore: "[\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.helmignore != "" {
				if err := os.WriteFile(filepath.Join(dir, ".helmignore"), []byte(tc.helmignore), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			patterns, err := readHelmignore(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s: error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			for _, n := range tc.ignored {
				if !ignored(patterns, n) {
					t.Errorf("%s: %s kept", tc.reason, n)
				}
			}
			for _, n := range tc.kept {
				if ignored(patterns, n) {
					t.Errorf("%s: %s left out", tc.reason, n)
				}
			}
		})
	}
}

// TestSetScalars: a scalar is replaced where it stands, whatever its style, and nothing else
// moves; what cannot be replaced in place is refused.
func TestSetScalars(t *testing.T) {
	cases := map[string]struct {
		reason  string
		src     string
		path    string
		want    string
		wantErr bool
	}{
		"plain": {reason: "an unquoted value", src: "a: 1\nappVersion: latest\nb: 2\n", path: "appVersion",
			want: "a: 1\nappVersion: \"v1.0.0\"\nb: 2\n"},
		"double quoted with a comment": {reason: "the comment after it stays", src: "image:\n  # the tag\n  tag: \"\"  # empty: appVersion\n",
			path: "image.tag", want: "image:\n  # the tag\n  tag: \"v1.0.0\"  # empty: appVersion\n"},
		"single quoted": {reason: "'' is a quote inside", src: "image:\n  tag: 'it''s'\n  digest: x\n", path: "image.tag",
			want: "image:\n  tag: \"v1.0.0\"\n  digest: x\n"},
		"plain with a comment": {reason: "plain scalars end before ' #'", src: "appVersion: latest # dev\n", path: "appVersion",
			want: "appVersion: \"v1.0.0\" # dev\n"},
		"block scalar": {reason: "a literal block spans lines", src: "appVersion: |\n  latest\n", path: "appVersion", wantErr: true},
		"missing":      {reason: "no such key", src: "a: 1\n", path: "appVersion", wantErr: true},
		"a mapping":    {reason: "not a scalar", src: "image:\n  tag: x\n", path: "image", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := setScalars([]byte(tc.src), map[string]string{tc.path: "v1.0.0"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s: error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
