package flux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/kustomize"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/kbuild"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestRenderedManifestsBuildWithFlux is the supported Flux path: each overlay rendered with
// `sandbox-render build --output-dir`, then built by github.com/fluxcd/pkg/kustomize (the library
// kustomize-controller uses), gives exactly the objects of the overlay's golden.
func TestRenderedManifestsBuildWithFlux(t *testing.T) {
	self := testenv.SandboxRender(t)
	root := testenv.RepoRoot()
	dirs, _ := filepath.Glob(filepath.Join(root, "overlays", "*"))
	if len(dirs) == 0 {
		t.Fatal("no overlays")
	}
	out := t.TempDir()
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			m, err := kbuild.Build(dir, self, kbuild.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rendered := filepath.Join(out, name)
			if _, _, err := kbuild.WriteDir(rendered, m); err != nil {
				t.Fatal(err)
			}
			rm, err := kustomize.SecureBuild(out, rendered, false)
			if err != nil {
				t.Fatalf("Flux could not build the rendered manifests: %v", err)
			}
			got, err := rm.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(root, "golden", "testdata", "overlays", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(objects(t, want), objects(t, got)); diff != "" {
				t.Errorf("Flux's build of the rendered manifests differs from the golden (-golden +flux):\n%s", diff)
			}
		})
	}
}

// TestFluxRefusesTheExecFunction shows why Flux needs the rendered manifests: its kustomize
// library disables plugins, so an overlay with the exec function does not build.
func TestFluxRefusesTheExecFunction(t *testing.T) {
	root := testenv.RepoRoot()
	_, err := kustomize.SecureBuild(root, filepath.Join(root, "overlays", "kind"), false)
	if err == nil || !strings.Contains(err.Error(), "external plugins disabled") {
		t.Fatalf("SecureBuild of an overlay with an exec function: err = %v, want Flux's refusal of external plugins", err)
	}
}

// objects parses a YAML stream into objects in canonical order, so two builds compare as sets of
// objects regardless of their order in the stream.
func objects(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Parse("stream", b)
	if err != nil {
		t.Fatal(err)
	}
	manifest.SortCanonical(objs)
	return objs
}
