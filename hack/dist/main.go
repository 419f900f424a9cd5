// Command dist builds what `make images`, `make push` and `make release` ship, with Go tooling
// only (no container engine, no base image, no network but the registry pushed to):
//
//	go run ./hack/dist images  --version v0.1.0 --commit $(git rev-parse HEAD) --source-date-epoch $(git log -1 --format=%ct) [--dirty]
//	go run ./hack/dist push    --registry ghcr.io/you
//	go run ./hack/dist release --version v0.1.0 --commit ... --source-date-epoch ... [--dirty]
//
// images cross-compiles sandbox-controller, sandbox-router and sandbox-render for linux/amd64 and
// linux/arm64 (CGO_ENABLED=0, -trimpath, the version and commit stamped by -ldflags -X) and
// writes each as one multi-platform OCI image layout, dist/images/<name>/, and a tarball of it,
// dist/images/<name>.tar (see ociimage.Files for what reads which). release does the same and
// then writes dist/install.yaml, router.yaml, argocd-cmp.yaml, the Helm chart packaged as
// sandbox-gitops-<version without v>.tgz and SHA256SUMS, every image pinned to the digest of the
// index it just built.
//
// The Makefile reads git (commit, its time, whether the tree is dirty) and passes it in, so this
// program never looks at a clock or a repository: the same flags give the same bytes.
//
// Exit codes: 0 done, 1 a build or push failed, 2 usage error (a malformed --version).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/sandbox-gitops/sandbox-gitops/internal/ociimage"
	"github.com/sandbox-gitops/sandbox-gitops/internal/release"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
)

// Source is the repository the images' org.opencontainers.image.source label names.
const Source = "https://github.com/sandbox-gitops/sandbox-gitops"

// Commands are the binaries that become images, each ./cmd/<name>.
var Commands = []string{"sandbox-controller", "sandbox-router", "sandbox-render"}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "dist: %v\n", err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("want a command: images, push or release")}
	}
	fs := flag.NewFlagSet("dist "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b buildFlags
	b.root = "."
	fs.StringVar(&b.root, "root", ".", "the repository to build")
	fs.StringVar(&b.out, "out", "dist", "output directory (images go into <out>/images)")
	registry := fs.String("registry", release.DefaultRegistry, "registry and path the images are named under (push: where they go)")
	switch args[0] {
	case "images", "release":
		fs.StringVar(&b.version, "version", "v0.0.0-dev", "the version (semver vX.Y.Z[-pre]); the image tag")
		fs.StringVar(&b.commit, "commit", "", "the git commit built (required)")
		fs.BoolVar(&b.dirty, "dirty", false, "the tree has uncommitted changes: the version becomes <version>-dirty")
		fs.Int64Var(&b.epoch, "source-date-epoch", -1, "the commit's time in Unix seconds, every timestamp in the images (required)")
		fs.StringVar(&b.loadArch, "load-arch", runtime.GOARCH, "the architecture whose image the tarballs' docker manifest.json names (docker load, kind load)")
	case "push":
	default:
		return usageError{fmt.Errorf("unknown command %q: want images, push or release", args[0])}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	b.registry = strings.TrimSuffix(*registry, "/")
	if args[0] == "push" {
		if *registry == release.DefaultRegistry && !flagSet(fs, "registry") {
			return usageError{errors.New("push: --registry is required (REGISTRY=host/path with make push)")}
		}
		return push(ctx, filepath.Join(b.out, "images"), b.registry, stdout)
	}
	if err := release.CheckVersion(b.version); err != nil {
		return usageError{err}
	}
	if b.commit == "" || b.epoch < 0 {
		return usageError{errors.New("--commit and --source-date-epoch are required (the Makefile passes them from git)")}
	}
	built, err := buildImages(ctx, b, stderr)
	if err != nil {
		return err
	}
	for _, i := range built {
		fmt.Fprintln(stdout, i.Ref())
	}
	if args[0] == "release" {
		return writeRelease(b, built, stdout)
	}
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type buildFlags struct {
	root, out, registry string
	version, commit     string
	dirty               bool
	epoch               int64
	loadArch            string
}

// buildImages cross-compiles every command for every platform and writes the layouts and
// tarballs; it returns each image's pinned reference, in Commands order.
func buildImages(ctx context.Context, b buildFlags, stderr io.Writer) ([]release.Image, error) {
	v := release.Effective(b.version, b.dirty)
	created := time.Unix(b.epoch, 0).UTC()
	var load *ociimage.Platform
	for _, p := range ociimage.Platforms {
		if p.Arch == b.loadArch {
			load = &p
		}
	}
	if load == nil {
		return nil, usageError{fmt.Errorf("--load-arch %q: the images are built for %v", b.loadArch, ociimage.Platforms)}
	}
	binDir, err := os.MkdirTemp("", "sandbox-gitops-dist-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	imagesDir := filepath.Join(b.out, "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return nil, err
	}
	var out []release.Image
	for _, name := range Commands {
		spec := ociimage.Spec{Name: name, Binaries: map[ociimage.Platform][]byte{}, Version: v, Revision: b.commit,
			Source: Source, Created: created}
		for _, p := range ociimage.Platforms {
			bin := filepath.Join(binDir, p.Arch, name)
			if err := goBuild(ctx, b.root, name, p.Arch, bin, v, b.commit, stderr); err != nil {
				return nil, err
			}
			if spec.Binaries[p], err = os.ReadFile(bin); err != nil {
				return nil, err
			}
		}
		idx, err := ociimage.Index(spec)
		if err != nil {
			return nil, err
		}
		repo := b.registry + "/" + name
		files, err := ociimage.Files(idx, repo+":"+v, v, *load)
		if err != nil {
			return nil, err
		}
		// Only our own outputs are replaced: the layout directory and tarball of this image.
		dir := filepath.Join(imagesDir, name)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := ociimage.WriteDir(dir, files); err != nil {
			return nil, err
		}
		if err := writeTar(dir+".tar", files, created); err != nil {
			return nil, err
		}
		digest, err := ociimage.Digest(idx)
		if err != nil {
			return nil, err
		}
		out = append(out, release.Image{Name: release.DefaultRegistry + "/" + name, Repository: repo, Tag: v, Digest: digest})
	}
	return out, nil
}

func writeTar(path string, files []ociimage.File, mtime time.Time) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := ociimage.WriteTar(f, files, mtime); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// goBuild cross-compiles ./cmd/<name> as a static linux binary stamped with the version and
// commit. -buildvcs=false because the commit comes from the flags (and a worktree or a copy of
// the source may have no usable .git); -s -w because nobody debugs a binary inside the image
// with DWARF, and the image is a third of the size without.
func goBuild(ctx context.Context, root, name, arch, out, v, commit string, stderr io.Writer) error {
	ld := append([]string{"-s", "-w"}, version.LDFlags(v, commit)...)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", strings.Join(ld, " "),
		"-o", out, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %w", name, arch, err)
	}
	return nil
}

// push uploads every layout under dir (as `make images` wrote them) to registry/<name>:<tag>, the
// tag being the one the layout's index.json names, and prints each pushed reference by digest.
func push(ctx context.Context, dir, registry string, stdout io.Writer) error {
	for _, name := range Commands {
		p, err := layout.FromPath(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%s: %w (run make images first)", name, err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			return err
		}
		im, err := top.IndexManifest()
		if err != nil {
			return err
		}
		if len(im.Manifests) != 1 {
			return fmt.Errorf("%s: index.json has %d entries, want the one image index make images writes", name, len(im.Manifests))
		}
		idx, err := top.ImageIndex(im.Manifests[0].Digest)
		if err != nil {
			return err
		}
		tag := im.Manifests[0].Annotations[ociimage.RefName]
		if tag == "" {
			return fmt.Errorf("%s: index.json names no tag (%s)", name, ociimage.RefName)
		}
		d, err := ociimage.Push(ctx, idx, registry+"/"+name+":"+tag)
		if err != nil {
			return fmt.Errorf("pushing %s: %w", name, err)
		}
		fmt.Fprintln(stdout, d.String())
	}
	return nil
}

func writeRelease(b buildFlags, images []release.Image, stdout io.Writer) error {
	v := release.Effective(b.version, b.dirty)
	files, err := release.Manifests(b.root, v, images)
	if err != nil {
		return err
	}
	chart, tgz, err := release.Chart(b.root, v, images, time.Unix(b.epoch, 0))
	if err != nil {
		return fmt.Errorf("packaging the Helm chart: %w", err)
	}
	files[chart] = tgz
	if err := release.Write(b.out, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d files and SHA256SUMS)\n", b.out, len(files))
	return nil
}
