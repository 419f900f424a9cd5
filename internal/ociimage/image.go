// Package ociimage assembles this repository's container images from static Go binaries, with
// go-containerregistry and no container engine, base image or network: one layer holding the
// binary and the passwd and group files of a non-root user, on an empty base, one image per
// platform under one OCI image index.
//
// The same inputs give the same bytes, so the same commit built with the same Go toolchain gives
// the same digests wherever it is built: every timestamp (file mtimes, the config's created, the
// history) is the Spec's Created (the commit's time, SOURCE_DATE_EPOCH), tar entries are in a
// fixed order with fixed owners and modes, maps are sorted by encoding/json, and the layer is
// gzipped by one library at one level. What it deliberately does not normalise: the binaries
// themselves, which Go makes reproducible under -trimpath with the same toolchain and flags.
//
// Assembly (Index) is pure; Files lays an index out as the files of an OCI image layout, which
// WriteDir and WriteTar write; Push is the one function that talks to a network.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user every image runs as: distroless's nonroot, which the manifests' securityContexts
// (runAsUser: 65532) name too.
const (
	UID      = 65532
	User     = "nonroot"
	BinDir   = "/usr/local/bin"
	HomeDir  = "/home/nonroot"
	passwd   = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group    = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	userSpec = "65532:65532"
)

// OCI annotation and label keys (image-spec annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	// RefName names an index.json entry by its tag (the spec's grammar has no room for a
	// registry or a colon); containerd and docker save put the full reference in ImageName.
	RefName   = "org.opencontainers.image.ref.name"
	ImageName = "io.containerd.image.name"
)

// Platform is a linux architecture an image is built for.
type Platform struct {
	Arch    string // GOARCH: amd64, arm64
	Variant string // arm64 images say v8, as the registries' multi-arch images do
}

func (p Platform) String() string {
	if p.Variant != "" {
		return "linux/" + p.Arch + "/" + p.Variant
	}
	return "linux/" + p.Arch
}

// Platforms are the platforms of every image: the Kubernetes nodes one meets.
var Platforms = []Platform{{Arch: "amd64"}, {Arch: "arm64", Variant: "v8"}}

// Spec is one image: a binary per platform and what the image says about itself.
type Spec struct {
	// Name is the binary's name, the file /usr/local/bin/<Name> and the entrypoint.
	Name string
	// Binaries holds the static binary for each platform (built with CGO_ENABLED=0: there is no
	// libc in the image).
	Binaries map[Platform][]byte
	// Version, Revision and Source become the OCI labels and annotations.
	Version, Revision, Source string
	// Created is every timestamp in the image: the commit's time, for reproducible digests.
	Created time.Time
	// Platforms are the platforms to build; nil means every entry of Platforms. The local
	// node's images (internal/cluster) are built for the one platform that runs them.
	Platforms []Platform
	// Links are symbolic links added after the binary, slash-separated path in the image (no
	// leading slash) to target, for a program that is called by other names: the busybox of the
	// local node's volume helper answers to bin/sh.
	Links map[string]string
	// User is who the entrypoint runs as; empty means the non-root user (UID, 65532:65532) the
	// manifests' securityContexts name.
	User string
	// Files are more executables, slash-separated path in the image (no leading slash) to
	// content, added after the binary with mode 0755: a program the binary runs, such as the
	// busybox that gives upstream's sandboxd image the shell its ProcessService executes
	// commands with.
	Files map[string][]byte
	// Dirs are directories, path in the image to the uid (and gid) that owns them, mode 0755,
	// added after Files: a workspace the entrypoint writes as a user other than root, such as
	// sandboxd's /workspace, which its image gives user 1000.
	Dirs map[string]int
}

// Metadata are the labels of the image config, and the annotations of its manifests and index.
func (s Spec) Metadata() map[string]string {
	return map[string]string{
		LabelSource:   s.Source,
		LabelRevision: s.Revision,
		LabelVersion:  s.Version,
		LabelCreated:  s.Created.UTC().Format(time.RFC3339),
		LabelTitle:    s.Name,
	}
}

// Index assembles the multi-platform image index of a Spec, one image per entry of Platforms.
func Index(s Spec) (v1.ImageIndex, error) {
	if s.Name == "" || path.Base(s.Name) != s.Name {
		return nil, fmt.Errorf("image name %q: want a plain file name", s.Name)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	platforms := s.Platforms
	if platforms == nil {
		platforms = Platforms
	}
	for _, p := range platforms {
		bin, ok := s.Binaries[p]
		if !ok || len(bin) == 0 {
			return nil, fmt.Errorf("%s: no binary for %s", s.Name, p)
		}
		img, err := image(s, p, bin)
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", s.Name, p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: p.Arch, Variant: p.Variant},
		}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, s.Metadata()).(v1.ImageIndex), nil
}

func image(s Spec, p Platform, bin []byte) (v1.Image, error) {
	layerTar, err := rootfs(s.Name, bin, s, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   created,
		CreatedBy: "hack/dist: " + s.Name + " " + s.Version + " (static binary on an empty base)",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = created
	cfg.OS, cfg.Architecture, cfg.Variant = "linux", p.Arch, p.Variant
	user := s.User
	if user == "" {
		user = userSpec
	}
	pathEnv := "PATH=" + BinDir
	if len(s.Links) > 0 || len(s.Files) > 0 {
		pathEnv += ":/bin"
	}
	cfg.Config = v1.Config{
		Entrypoint: []string{path.Join(BinDir, s.Name)},
		User:       user,
		WorkingDir: "/",
		// The Argo CD sidecar finds sandbox-render on PATH; nothing else is in the image.
		Env:    []string{pathEnv},
		Labels: s.Metadata(),
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, s.Metadata()).(v1.Image), nil
}

// rootfs is the image's one layer: directories, /etc/passwd, /etc/group, the user's home, and
// the binary, in this fixed order, owned by root (the home by the user), with fixed modes and
// every mtime at created; then the Spec's Files, Dirs and Links, each sorted by path, so that a
// Spec without them has the layer it had before they existed (the same digests). No shell, no
// libc, no CA bundle unless Files adds one: the binaries talk only to the API server (whose CA
// the ServiceAccount mounts) and to Pods.
func rootfs(name string, bin []byte, s Spec, created time.Time) ([]byte, error) {
	l := newLayout([]layerEntry{
		{name: "etc/", mode: 0o755, isDir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, isDir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, isDir: true},
		{name: "usr/", mode: 0o755, isDir: true},
		{name: "usr/local/", mode: 0o755, isDir: true},
		{name: "usr/local/bin/", mode: 0o755, isDir: true},
		// Readable and executable by every user: the Argo CD sidecar runs it as user 999.
		{name: "usr/local/bin/" + name, mode: 0o755, data: bin},
	})
	for _, f := range slices.Sorted(maps.Keys(s.Files)) {
		if err := l.add("file", f, layerEntry{name: f, mode: 0o755, data: s.Files[f]}); err != nil {
			return nil, err
		}
	}
	for _, d := range slices.Sorted(maps.Keys(s.Dirs)) {
		if err := l.add("directory", d, layerEntry{name: d + "/", mode: 0o755, uid: s.Dirs[d], isDir: true}); err != nil {
			return nil, err
		}
	}
	for _, link := range slices.Sorted(maps.Keys(s.Links)) {
		if err := l.add("link", link, layerEntry{name: link, mode: 0o777, target: s.Links[link]}); err != nil {
			return nil, err
		}
	}
	return writeLayer(l.entries, created)
}

// layerEntry is one file, directory or symbolic link of the layer.
type layerEntry struct {
	name   string
	mode   int64
	uid    int
	data   []byte
	isDir  bool
	target string // a symbolic link's
}

// rootLayout is the layer's entries in order, with the paths taken and which of them are
// directories.
type rootLayout struct {
	entries []layerEntry
	dirs    map[string]bool
	taken   map[string]bool
}

func newLayout(entries []layerEntry) *rootLayout {
	l := &rootLayout{entries: entries, dirs: map[string]bool{}, taken: map[string]bool{}}
	for _, e := range entries {
		l.dirs[e.name] = e.isDir
		l.taken[strings.TrimSuffix(e.name, "/")] = true
	}
	return l
}

// add appends e (a what at path p) after its parent directory, which it creates when no entry
// has; a path that is not clean and relative, or that the layer has already, is an error.
func (l *rootLayout) add(what, p string, e layerEntry) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("%s %q: want a clean relative path", what, p)
	}
	if l.taken[p] {
		return fmt.Errorf("%s %q: the image already has that path", what, p)
	}
	if d := path.Dir(p); d != "." && !l.dirs[d+"/"] {
		if l.taken[d] {
			return fmt.Errorf("%s %q: %s is not a directory", what, p, d)
		}
		l.entries = append(l.entries, layerEntry{name: d + "/", mode: 0o755, isDir: true})
		l.dirs[d+"/"], l.taken[d] = true, true
	}
	l.entries = append(l.entries, e)
	l.taken[p] = true
	if e.isDir {
		l.dirs[p+"/"] = true
	}
	return nil
}

// writeLayer is the tar of entries in order, every mtime at created.
func writeLayer(entries []layerEntry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, Size: int64(len(e.data)),
			ModTime: created.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR,
		}
		if e.isDir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if e.target != "" {
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e.target
		}
		switch e.uid {
		case UID:
			h.Uname, h.Gname = User, User
		case 0:
			h.Uname, h.Gname = "root", "root"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
