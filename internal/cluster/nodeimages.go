package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/internal/ociimage"
)

// NodeBinaries are the programs in the binary directory that the real node needs besides
// Binaries: its kubelet and kube-proxy, the cluster's DNS and volume provisioner, and kube-router,
// whose firewall enforces NetworkPolicies, all built from Go modules by `make tools`.
var NodeBinaries = []string{"kubelet", "kube-proxy", "coredns", "local-path-provisioner", "kube-router"}

// The images of the node's own Pods, built here and imported, never pulled. The registry host
// names nothing that resolves: a pull of one of these fails at once.
const (
	coreDNSImage   = "sandbox-gitops.local/coredns:v1.15.0"
	localPathImage = "sandbox-gitops.local/local-path-provisioner:v0.0.30"
	// BusyboxImage is busybox-static as an image, run as root: the provisioner's helper, and a shell
	// for tests on the real node.
	BusyboxImage = "sandbox-gitops.local/busybox:v1"
)

// NodeImage is an image for the real node: a static binary as its entrypoint.
type NodeImage struct {
	// Ref is the image's name, tag included.
	Ref string
	// Binary is the path of the static linux binary for this machine's architecture.
	Binary string
	// Links are symbolic links in the image, as ociimage.Spec's.
	Links map[string]string
	// User is who it runs as; empty means ociimage's non-root user.
	User string
	// Files are more static binaries in the image, path in the image to the path of the file
	// on this machine (read when the image is built), as ociimage.Spec's Files.
	Files map[string]string
	// Dirs are directories in the image and the uid that owns them, as ociimage.Spec's.
	Dirs map[string]int
}

// imageEpoch is every timestamp in the node's images: built again from the same binaries, they
// have the same digests, and containerd keeps one copy.
var imageEpoch = time.Unix(0, 0).UTC()

// BuildImage writes img as an image tarball (an OCI layout whose index.json names it) to path,
// for this machine's architecture only, ready for ImportImage.
func BuildImage(img NodeImage, path string) error {
	bin, err := os.ReadFile(img.Binary)
	if err != nil {
		return err
	}
	repo, tag, ok := strings.Cut(img.Ref[strings.LastIndex(img.Ref, "/")+1:], ":")
	if !ok || repo == "" || tag == "" {
		return fmt.Errorf("image %q: want name:tag", img.Ref)
	}
	var extra map[string][]byte
	for p, src := range img.Files {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
		if extra == nil {
			extra = map[string][]byte{}
		}
		extra[p] = b
	}
	platform := ociimage.Platform{Arch: runtime.GOARCH}
	if platform.Arch == "arm64" {
		platform.Variant = "v8"
	}
	idx, err := ociimage.Index(ociimage.Spec{
		Name: filepath.Base(img.Binary), Binaries: map[ociimage.Platform][]byte{platform: bin},
		Version: tag, Source: "local", Created: imageEpoch, Platforms: []ociimage.Platform{platform},
		Links: img.Links, User: img.User, Files: extra, Dirs: img.Dirs,
	})
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	files, err := ociimage.Files(idx, img.Ref, tag, platform)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	var buf bytes.Buffer
	if err := ociimage.WriteTar(&buf, files, imageEpoch); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// importNodeImages builds and imports the images the node's own Pods run: the pause image, CoreDNS,
// the local-path provisioner and its busybox helper.
func (c *Cluster) importNodeImages(ctx context.Context) error {
	np := c.node.paths
	images := []NodeImage{
		{Ref: pauseImage, Binary: filepath.Join(np.root, "pause")},
		{Ref: coreDNSImage, Binary: c.bin("coredns")},
		{Ref: localPathImage, Binary: c.bin("local-path-provisioner")},
		// The helper Pod runs `/bin/sh /script/setup` as root in a hostPath directory.
		{Ref: BusyboxImage, Binary: busyboxPath, User: "0:0",
			Links: map[string]string{"bin/sh": "/usr/local/bin/busybox", "bin/mkdir": "/usr/local/bin/busybox", "bin/rm": "/usr/local/bin/busybox"}},
	}
	for _, img := range images {
		// bin/ holds symlinks into the tools cache; the image holds the binary.
		if resolved, err := filepath.EvalSymlinks(img.Binary); err == nil {
			img.Binary = resolved
		}
		tarball := filepath.Join(np.images(), strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref)+".tar")
		if err := BuildImage(img, tarball); err != nil {
			return err
		}
		if err := c.ImportImage(ctx, tarball); err != nil {
			return err
		}
	}
	return nil
}
