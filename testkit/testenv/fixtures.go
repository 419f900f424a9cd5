package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
)

// ReadObject reads a one-object fixture as an API server would hand it to a GitOps tool:
// unstructured, integers as int64.
func ReadObject(t testing.TB, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want one", path, len(objs))
	}
	return objs[0]
}

// Fixtures lists the fixtures <dir>/*.yaml, leaving out the *.expected.yaml goldens beside
// them, in name order; an empty directory fails the test.
func Fixtures(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if !strings.HasSuffix(p, ".expected.yaml") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	return out
}
