package crd_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestGeneratedFilesUpToDate runs controller-gen, exactly as `make manifests` does, on a copy of
// the API packages and fails if the committed deepcopy code or CRDs differ from what it writes.
func TestGeneratedFilesUpToDate(t *testing.T) {
	gen := testenv.Tool(t, "controller-gen")
	root := testenv.RepoRoot()
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "hack/boilerplate.go.txt"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(tmp, f))
	}
	err := filepath.WalkDir(filepath.Join(root, "api"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		copyFile(t, p, filepath.Join(tmp, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"object:headerFile=hack/boilerplate.go.txt", "paths=./api/..."},
		{"crd:crdVersions=v1,maxDescLen=0", "paths=./api/...", "output:crd:artifacts:config=config/crd/bases"},
	} {
		cmd := exec.Command(gen, args...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("controller-gen %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	generated, _ := filepath.Glob(filepath.Join(tmp, "api", "*", "*", "zz_generated.deepcopy.go"))
	crds, _ := filepath.Glob(filepath.Join(tmp, "config", "crd", "bases", "*.yaml"))
	committed, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if len(generated) != 5 || len(crds) != 5 || len(committed) != len(crds) {
		t.Fatalf("controller-gen wrote %d deepcopy files and %d CRDs (%d committed); want 5, 5 and 5", len(generated), len(crds), len(committed))
	}
	for _, g := range append(generated, crds...) {
		rel, _ := filepath.Rel(tmp, g)
		want, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s is generated but not committed; run make manifests", rel)
			continue
		}
		got, _ := os.ReadFile(g)
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s is stale; run make manifests (-committed +generated):\n%s", rel, diff)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAllIsConfigCRD: crd.All(), which every test installs, is what `kustomize build config/crd`
// (and so config/default and bases/crds) gives, conversion stanza included.
func TestAllIsConfigCRD(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	out, err := exec.Command(kustomize, "build", filepath.Join(testenv.RepoRoot(), "config", "crd")).Output()
	if err != nil {
		t.Fatalf("kustomize build config/crd: %v", err)
	}
	var built []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range strings.Split(string(out), "\n---\n") {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict([]byte(doc), c); err != nil {
			t.Fatal(err)
		}
		built = append(built, c)
	}
	byName := func(s []*apiextensionsv1.CustomResourceDefinition) {
		sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	}
	byName(built)
	all, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	byName(all)
	if diff := cmp.Diff(built, all); diff != "" {
		t.Errorf("crd.All() differs from kustomize build config/crd (-kustomize +crd.All):\n%s", diff)
	}
	for _, c := range all {
		if c.Spec.Group == "render.sandbox-gitops.dev" {
			if c.Spec.Conversion != nil && c.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
				t.Errorf("%s: one version, nothing to convert, yet conversion is %v", c.Name, c.Spec.Conversion)
			}
			continue
		}
		if c.Spec.Conversion == nil || c.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			t.Errorf("%s: v1alpha1 is served, so conversion must go to the webhook, not %v", c.Name, c.Spec.Conversion)
		}
	}
}
