package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var created = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func spec() Spec {
	return Spec{Name: "tool", Version: "v0.1.0", Revision: "0123456789abcdef", Source: "https://example.com/repo", Created: created,
		Binaries: map[Platform][]byte{Platforms[0]: []byte("amd64 binary"), Platforms[1]: []byte("arm64 binary")}}
}

// nthImage is the image of the index's nth manifest.
func nthImage(t *testing.T, idx v1.ImageIndex, n int) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) <= n {
		t.Fatalf("the index has %d manifests, want a %dth", len(im.Manifests), n+1)
	}
	img, err := idx.Image(im.Manifests[n].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// entry is one file of a layer as a test reads it.
type entry struct {
	Mode     int64
	UID, GID int
	Data     string
	ModTime  time.Time
}

func layerFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer, got %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = entry{Mode: h.Mode, UID: h.Uid, GID: h.Gid, Data: string(b), ModTime: h.ModTime}
	}
}

// TestIndex: one OCI index, one image per platform, each a static binary on an empty base run
// as user 65532 with the OCI labels, /etc/passwd naming that user, and no shell.
func TestIndex(t *testing.T) {
	idx, err := Index(spec())
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || im.Annotations[LabelRevision] != "0123456789abcdef" {
		t.Errorf("index: media type %s, annotations %v", im.MediaType, im.Annotations)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || m.Layers[0].MediaType != types.OCILayer {
			t.Errorf("%s: media types %s, %s, %s; want OCI's", d.Platform, m.MediaType, m.Config.MediaType, m.Layers[0].MediaType)
		}
		if m.Annotations[LabelVersion] != "v0.1.0" {
			t.Errorf("%s: manifest annotations %v", d.Platform, m.Annotations)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		want := v1.Config{
			Entrypoint: []string{"/usr/local/bin/tool"}, User: "65532:65532", WorkingDir: "/", Env: []string{"PATH=/usr/local/bin"},
			Labels: map[string]string{LabelSource: "https://example.com/repo", LabelRevision: "0123456789abcdef", LabelVersion: "v0.1.0",
				LabelCreated: "2026-07-01T12:00:00Z", LabelTitle: "tool"},
		}
		if diff := cmp.Diff(want, cfg.Config); diff != "" {
			t.Errorf("%s: config (-want +got):\n%s", d.Platform, diff)
		}
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" || !cfg.Created.Time.Equal(created) {
			t.Errorf("%s: config says %s/%s created %v", d.Platform, cfg.OS, cfg.Architecture, cfg.Created)
		}
		files := layerFiles(t, img)
		if got := files["etc/passwd"].Data; !strings.Contains(got, "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") {
			t.Errorf("%s: /etc/passwd has no nonroot user 65532:\n%s", d.Platform, got)
		}
		if got := files["etc/group"].Data; !strings.Contains(got, "\nnonroot:x:65532:\n") {
			t.Errorf("%s: /etc/group has no nonroot group 65532:\n%s", d.Platform, got)
		}
		bin := files["usr/local/bin/tool"]
		if bin.Data != d.Platform.Architecture+" binary" || bin.Mode != 0o755 || bin.UID != 0 {
			t.Errorf("%s: the binary is %+v", d.Platform, bin)
		}
		for name, e := range files {
			if strings.HasPrefix(name, "bin/") || strings.HasSuffix(name, "/sh") {
				t.Errorf("%s: %s is in the image; there must be no shell", d.Platform, name)
			}
			if !e.ModTime.Equal(created) {
				t.Errorf("%s: %s has mtime %v, want the commit's time", d.Platform, name, e.ModTime)
			}
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64/v8"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

// TestReproducible: the same spec gives the same digests and the same tarball bytes; another
// commit time gives other digests (the time is in the image, not taken from the clock).
func TestReproducible(t *testing.T) {
	build := func(s Spec) (string, []byte) {
		idx, err := Index(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(idx)
		if err != nil {
			t.Fatal(err)
		}
		files, err := Files(idx, "example.com/tool:v0.1.0", "v0.1.0", Platforms[0])
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteTar(&buf, files, s.Created); err != nil {
			t.Fatal(err)
		}
		return d, buf.Bytes()
	}
	d1, tar1 := build(spec())
	d2, tar2 := build(spec())
	if d1 != d2 || !bytes.Equal(tar1, tar2) {
		t.Errorf("two builds differ: %s and %s (tarballs equal: %v)", d1, d2, bytes.Equal(tar1, tar2))
	}
	later := spec()
	later.Created = created.Add(time.Second)
	if d3, _ := build(later); d3 == d1 {
		t.Errorf("a later commit time gave the same digest %s", d3)
	}
}

// TestLayoutAndTarball: the directory is an OCI layout go-containerregistry reads back as the
// same index (what crane push <dir> pushes); the tarball holds the same layout plus a docker
// manifest.json that tarball.ImageFromPath (crane push <tar>, crane's docker load path) reads as
// the load platform's image, the same config (docker's image ID), tagged.
func TestLayoutAndTarball(t *testing.T) {
	idx, err := Index(spec())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	files, err := Files(idx, "example.com/tool:v0.1.0", "v0.1.0", Platforms[1])
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tool")
	if err := WriteDir(dir, files); err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != want || tm.Manifests[0].Annotations[RefName] != "v0.1.0" ||
		tm.Manifests[0].Annotations[ImageName] != "example.com/tool:v0.1.0" {
		t.Fatalf("index.json: %+v, want the index %s named v0.1.0", tm.Manifests, want)
	}
	back, err := top.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := back.Digest(); got != want {
		t.Errorf("read back %s, want %s", got, want)
	}
	if err := WriteDir(dir, files); err == nil {
		t.Error("WriteDir wrote into a layout that was already there")
	}

	tarPath := filepath.Join(t.TempDir(), "tool.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTar(f, files, created); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tag, _ := name.NewTag("example.com/tool:v0.1.0")
	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatalf("the tarball is not a docker archive of example.com/tool:v0.1.0: %v", err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	wantCfg, _ := nthImage(t, back, 1).ConfigName()
	if cfgName != wantCfg {
		t.Errorf("the docker archive's image is %s, want the arm64 image's config %s", cfgName, wantCfg)
	}
	if _, err := tarball.ImageFromPath(tarPath, nil); err != nil {
		t.Errorf("crane push <tar> needs exactly one image in manifest.json: %v", err)
	}
}

// TestDigestsKept: Files and Dirs came after images were built and imported; a Spec that uses
// neither has the digests it had before them, so no image changes under a user or in
// containerd's store. The digests were computed before Files and Dirs existed.
func TestDigestsKept(t *testing.T) {
	linked := spec()
	linked.Platforms = []Platform{Platforms[0]}
	linked.Links = map[string]string{"bin/sh": "/usr/local/bin/tool"}
	linked.User = "0:0"
	cases := map[string]struct {
		spec Spec
		want string
	}{
		"two platforms":         {spec(), "sha256:9df2edd4f80b0ac289bfc4bc66e5ce82c9bf5c96a359031990ec4dfd0c7788ab"},
		"links and a root user": {linked, "sha256:9ce5a6e672b6ba5348bc62b16e1c3bdc5ead0a0aa168722815c1f46332658524"},
	}
	for name, tc := range cases {
		idx, err := Index(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Digest(idx); err != nil || got != tc.want {
			t.Errorf("%s: digest %s (%v), want %s", name, got, err, tc.want)
		}
	}
}

// TestFilesAndDirs: extra executables and owned directories land in the layer after the binary,
// with their parents, and PATH then names /bin; a path given twice, or one that is not clean, is
// an error rather than a layer with two entries for one file.
func TestFilesAndDirs(t *testing.T) {
	s := spec()
	s.Platforms = []Platform{Platforms[0]}
	s.Files = map[string][]byte{"usr/local/bin/busybox": []byte("busybox binary")}
	s.Dirs = map[string]int{"workspace": 1000}
	s.Links = map[string]string{"bin/sh": "/usr/local/bin/busybox"}
	idx, err := Index(s)
	if err != nil {
		t.Fatal(err)
	}
	img := nthImage(t, idx, 0)
	files := layerFiles(t, img)
	if got := files["usr/local/bin/busybox"]; got.Data != "busybox binary" || got.Mode != 0o755 || got.UID != 0 {
		t.Errorf("usr/local/bin/busybox: %+v, want the content, mode 0755, owned by root", got)
	}
	if got, ok := files["workspace/"]; !ok || got.UID != 1000 || got.GID != 1000 || got.Mode != 0o755 {
		t.Errorf("workspace/: %+v (present %v), want a directory owned by 1000:1000", got, ok)
	}
	if _, ok := files["bin/sh"]; !ok {
		t.Errorf("the link bin/sh is missing")
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATH=" + BinDir + ":/bin"}, cfg.Config.Env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}

	bad := map[string]func(*Spec){
		"a file over the binary":   func(s *Spec) { s.Files = map[string][]byte{"usr/local/bin/tool": nil} },
		"a directory over a file":  func(s *Spec) { s.Dirs = map[string]int{"etc/passwd": 0} },
		"a link over a file":       func(s *Spec) { s.Files = map[string][]byte{"bin/sh": nil}; s.Links = map[string]string{"bin/sh": "x"} },
		"an absolute path":         func(s *Spec) { s.Files = map[string][]byte{"/bin/busybox": nil} },
		"a path that is not clean": func(s *Spec) { s.Dirs = map[string]int{"work/../space": 0} },
	}
	for name, change := range bad {
		s := spec()
		change(&s)
		if _, err := Index(s); err == nil {
			t.Errorf("%s: Index succeeded, want an error", name)
		}
	}
}
