package e2e

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// distEnv names the directory `make release` wrote; the e2e make targets set it.
const distEnv = "SANDBOX_E2E_DIST"

// images are the release's images, each dist/images/<name>/ and dist/images/<name>.tar.
var images = []string{"sandbox-controller", "sandbox-router", "sandbox-render"}

// release is what `make release` wrote: the manifests users apply and the images they name.
type release struct {
	dir string
	// install and router are the objects of install.yaml and router.yaml, in file order.
	install, router []*unstructured.Unstructured
	// digests are the digests of the images' indexes, by image name: what the manifests must pin.
	digests map[string]string
}

// readRelease reads the release in $SANDBOX_E2E_DIST, or skips the test when it is not set.
func readRelease(t *testing.T) *release {
	t.Helper()
	dir := os.Getenv(distEnv)
	if dir == "" {
		t.Skipf("e2e: skipped: %s is not set; `make e2e` builds the release into dist/ and runs this test", distEnv)
	}
	r := &release{dir: dir, digests: map[string]string{}}
	var err error
	if r.install, err = readManifest(filepath.Join(dir, "install.yaml")); err != nil {
		t.Fatal(err)
	}
	if r.router, err = readManifest(filepath.Join(dir, "router.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, name := range images {
		idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "images", name))
		if err != nil {
			t.Fatalf("image %s: %v (run `make release`)", name, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 {
			t.Fatalf("image %s: the layout's index.json has %d entries, want the one multi-platform index", name, len(m.Manifests))
		}
		r.digests[name] = m.Manifests[0].Digest.String()
	}
	return r
}

func readManifest(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w (run `make release`)", err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// pinnedImages are the images of every container of the release's workloads, by the name of the
// image (the last path element before the tag).
func pinnedImages(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			ref, _ := c.(map[string]any)["image"].(string)
			repoTag, _, _ := strings.Cut(ref, "@")
			name, _, _ := strings.Cut(path.Base(repoTag), ":")
			out[name] = append(out[name], ref)
		}
	}
	return out
}

// binaryFromImage writes the entrypoint of the image `name` for this machine's architecture,
// taken out of its layer in dist/images, into dir, and returns its path: the controller that
// runs locally is the one the image ships.
func (r *release) binaryFromImage(t *testing.T, name, dir string) string {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(filepath.Join(r.dir, "images", name))
	if err != nil {
		t.Fatal(err)
	}
	outer, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idx.ImageIndex(outer.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Config.Entrypoint) == 0 {
			t.Fatalf("image %s (%s) has no entrypoint", name, runtime.GOARCH)
		}
		entry := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
		fs := mutate.Extract(img)
		defer fs.Close()
		tr := tar.NewReader(fs)
		for {
			h, err := tr.Next()
			if err != nil {
				t.Fatalf("image %s (%s): entrypoint /%s not in its filesystem: %v", name, runtime.GOARCH, entry, err)
			}
			if strings.TrimPrefix(h.Name, "./") != entry || h.Typeflag != tar.TypeReg {
				continue
			}
			out := filepath.Join(dir, path.Base(entry))
			f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Skipf("e2e: skipped: image %s has no linux/%s image to run here", name, runtime.GOARCH)
	return ""
}
