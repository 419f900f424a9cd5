package kbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestOutputFileNames(t *testing.T) {
	cm := func(name string) fileKey { return fileKey{GVK: "v1_ConfigMap", Name: name} }
	long := strings.Repeat("a", 300)
	cases := map[string]struct {
		reason string
		keys   []fileKey
		want   []string
	}{
		"kustomize's names": {
			reason: "names that are plain file names already are kustomize build -o's, lower case",
			keys:   []fileKey{cm("foo"), {GVK: "apps_v1_Deployment", Name: "web"}, {Namespace: "team-a", GVK: "v1_Pod", Name: "p-1.2"}},
			want:   []string{"v1_configmap_foo.yaml", "apps_v1_deployment_web.yaml", "team-a_v1_pod_p-1.2.yaml"},
		},
		"path traversal": {
			reason: "separators and .. never reach the file system: the name is one element, suffixed by its hash",
			keys:   []fileKey{cm("x/../../victim"), cm(`..\..\win`)},
			want:   []string{"v1_configmap_x_.__.__victim-2e2b9d12.yaml", "v1_configmap_.__.__win-5edb1341.yaml"},
		},
		"case-only twins": {
			reason: "foo and Foo would be one file on a case-insensitive filesystem: Foo is renamed, foo keeps kustomize's name",
			keys:   []fileKey{cm("foo"), cm("Foo")},
			want:   []string{"v1_configmap_foo.yaml", "v1_configmap_foo-6fed7810.yaml"},
		},
		"kinds differing in case": {
			reason: "two kinds of one group that differ only in case both get their hash",
			keys:   []fileKey{{GVK: "x.io_v1_Widget", Name: "a"}, {GVK: "x.io_v1_WIDGET", Name: "a"}},
			want:   []string{"x.io_v1_widget_a-33ff376b.yaml", "x.io_v1_widget_a-088ecfac.yaml"},
		},
		"sanitised name meets a real one": {
			reason: "a/b becomes a_b plus a hash, so it never takes the file of an object really named a_b",
			keys:   []fileKey{cm("a_b"), cm("a/b")},
			want:   []string{"v1_configmap_a_b.yaml", "v1_configmap_a_b-486aaa91.yaml"},
		},
		"control characters and colons": {
			reason: "a newline, a NUL and a colon are each replaced",
			keys:   []fileKey{cm("a\nb\x00c"), {GVK: "rbac.authorization.k8s.io_v1_ClusterRole", Name: "system:view"}},
			want:   []string{"v1_configmap_a_b_c-a5467bfb.yaml", "rbac.authorization.k8s.io_v1_clusterrole_system_view-b6dced8e.yaml"},
		},
		"trailing dot": {
			reason: "a name ending in a dot gave \"..yaml\" (found by FuzzOutputFileNames)",
			keys:   []fileKey{cm("a.")},
			want:   []string{"v1_configmap_a_-e6c600c2.yaml"},
		},
		"too long": {
			reason: "a name past the bound is cut and suffixed by the hash of the whole",
			keys:   []fileKey{cm(long)},
			want:   []string{("v1_configmap_" + long)[:maxFileStem] + "-9a173d7d.yaml"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := outputFileNames(tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			for i, n := range got {
				checkPlainName(t, n)
				if again, _ := outputFileNames(tc.keys); again[i] != n {
					t.Errorf("%q: not deterministic: %q then %q", tc.keys[i].Name, n, again[i])
				}
			}
		})
	}
}

// TestOutputFileNameHash: the suffix is the SHA-256 of the key as written (namespace, kind and
// name joined by NUL bytes), so the same object keeps its file across runs and machines.
func TestOutputFileNameHash(t *testing.T) {
	k := fileKey{Namespace: "Team", GVK: "v1_ConfigMap", Name: "Foo"}
	got, err := outputFileNames([]fileKey{k})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("Team\x00v1_ConfigMap\x00Foo"))
	if want := "team_v1_configmap_foo-" + hex.EncodeToString(sum[:4]) + ".yaml"; got[0] != want {
		t.Errorf("got %s, want %s", got[0], want)
	}
}

func checkPlainName(t *testing.T, n string) {
	t.Helper()
	if !isPlainFileName(n) || strings.Contains(n, "..") || strings.ContainsAny(n, "/\\:") || len(n) > 255 || !strings.HasSuffix(n, ".yaml") || !utf8.ValidString(n) {
		t.Errorf("%q is not a plain, safe file name", n)
	}
	for _, r := range n {
		if r < 0x20 || r >= 0x7f {
			t.Errorf("%q holds %U", n, r)
		}
	}
	dir := "/out"
	if p := filepath.Join(dir, n); filepath.Dir(p) != dir {
		t.Errorf("%q lands in %s", n, filepath.Dir(p))
	}
}

// FuzzOutputFileNames: whatever an object's namespace, kind and name hold, its file is a plain
// name inside the directory, and two different objects never share a file, case ignored.
func FuzzOutputFileNames(f *testing.F) {
	for _, s := range [][3]string{
		{"", "v1_ConfigMap", "x/../../victim"},
		{"", "v1_ConfigMap", "Foo"},
		{"a/..", "v1_Pod", ".."},
		{"", "../../etc_v1_X", "passwd"},
		{"", "v1_ConfigMap", "a\nb"},
		{"", "v1_ConfigMap", strings.Repeat("é", 200)},
		{"", "v1_ConfigMap", "\xff\xfe"},
		{".", ".", "."},
		{"", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, ns, gvk, name string) {
		keys := []fileKey{{ns, gvk, name}, {ns, gvk, strings.ToLower(name)}, {ns, gvk, strings.ToUpper(name)}, {ns, gvk, name + "/"}}
		uniq := map[fileKey]bool{}
		var distinct []fileKey
		for _, k := range keys {
			if !uniq[k] {
				uniq[k] = true
				distinct = append(distinct, k)
			}
		}
		got, err := outputFileNames(distinct)
		if err != nil {
			if !strings.Contains(err.Error(), "both would be written") {
				t.Fatal(err)
			}
			return
		}
		seen := map[string]fileKey{}
		for i, n := range got {
			checkPlainName(t, n)
			if k, dup := seen[strings.ToLower(n)]; dup {
				t.Fatalf("%v and %v share %s", k, distinct[i], n)
			}
			seen[strings.ToLower(n)] = distinct[i]
		}
	})
}

// TestPathInside: a file name with a separator, .., or a symbolic link at its path is refused;
// a plain new or regular file is not.
func TestPathInside(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"new.yaml":      "",
		"mine.yaml":     "",
		"link.yaml":     "symbolic link",
		"sub.yaml":      "not a regular file",
		"../victim":     "not a plain file name",
		"..":            "not a plain file name",
		"a/b.yaml":      "not a plain file name",
		".hidden":       "not a plain file name",
		"a\nb.yaml":     "not a plain file name",
		`..\evil.yaml`:  "not a plain file name",
		MarkerFile:      "",
		"":              "not a plain file name",
		"\xff.yaml":     "not a plain file name",
		"kustomization": "",
	}
	for name, wantErr := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := pathInside(dir, name)
			switch {
			case wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
				t.Fatalf("got %q, %v; want an error with %q", p, err, wantErr)
			case err == nil && filepath.Dir(p) != dir:
				t.Fatalf("%s is outside %s", p, dir)
			}
		})
	}
}
