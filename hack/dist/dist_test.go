package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/ociimage"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// The release every test here looks at: v0.1.0 of a made-up commit, built once per test binary
// (three binaries for two platforms cost most of this package's run time).
const (
	commit = "0123456789abcdef0123456789abcdef01234567"
	epoch  = "1780000000"
)

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseOut  string
	releaseErr  string
	releaseCode int
)

func distArgs(cmd, out string) []string {
	return []string{cmd, "--root", testenv.RepoRoot(), "--out", out, "--version", "v0.1.0", "--commit", commit, "--source-date-epoch", epoch}
}

// built runs `dist release` for v0.1.0 into a directory shared by the package's tests.
func built(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		var err error
		if releaseDir, err = os.MkdirTemp("", "sandbox-gitops-dist-test-"); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		releaseCode = run(context.Background(), distArgs("release", releaseDir), &stdout, &stderr)
		releaseOut, releaseErr = stdout.String(), stderr.String()
	})
	if releaseCode != 0 {
		t.Fatalf("dist release: exit %d\n%s", releaseCode, releaseErr)
	}
	return releaseDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// readIndex reads an image's layout as `make images` wrote it: the index and its digest.
func readIndex(t *testing.T, dir, name string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(dir, "images", name))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("%s: index.json has %v (%v), want one index", name, im, err)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// layerFile returns one file of an image's only layer.
func layerFile(t *testing.T, img v1.Image, path string) ([]byte, bool) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		}
	}
}

func platformImage(t *testing.T, idx v1.ImageIndex, arch string) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s image in the index", arch)
	return nil
}

// TestImages: each of the three images is one index with an image for amd64 and arm64, each
// running its binary as user 65532 with the release's labels, /etc/passwd naming the user, and
// no shell.
func TestImages(t *testing.T) {
	dir := built(t)
	for _, name := range Commands {
		t.Run(name, func(t *testing.T) {
			idx := readIndex(t, dir, name)
			im, _ := idx.IndexManifest()
			var archs []string
			for _, d := range im.Manifests {
				archs = append(archs, d.Platform.OS+"/"+d.Platform.Architecture)
			}
			if strings.Join(archs, ",") != "linux/amd64,linux/arm64" {
				t.Errorf("platforms %v, want one manifest each for linux/amd64 and linux/arm64", archs)
			}
			for _, arch := range []string{"amd64", "arm64"} {
				img := platformImage(t, idx, arch)
				cfg, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				c := cfg.Config
				if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/"+name || c.User != "65532:65532" || cfg.Architecture != arch {
					t.Errorf("%s: entrypoint %v, user %q, architecture %s", arch, c.Entrypoint, c.User, cfg.Architecture)
				}
				for k, want := range map[string]string{ociimage.LabelSource: Source, ociimage.LabelRevision: commit, ociimage.LabelVersion: "v0.1.0"} {
					if c.Labels[k] != want {
						t.Errorf("%s: label %s = %q, want %q", arch, k, c.Labels[k], want)
					}
				}
				if passwd, _ := layerFile(t, img, "etc/passwd"); !bytes.Contains(passwd, []byte("nonroot:x:65532:65532:")) {
					t.Errorf("%s: /etc/passwd:\n%s", arch, passwd)
				}
				for _, sh := range []string{"bin/sh", "usr/bin/sh", "bin/bash"} {
					if _, ok := layerFile(t, img, sh); ok {
						t.Errorf("%s: /%s is in the image", arch, sh)
					}
				}
			}
		})
	}
}

// TestBinaryVersion: the binary taken out of its layer (this machine's architecture) runs and
// names the release and the commit.
func TestBinaryVersion(t *testing.T) {
	dir := built(t)
	if runtime.GOOS != "linux" {
		t.Skip("the images' binaries are linux binaries")
	}
	for _, name := range Commands {
		img := platformImage(t, readIndex(t, dir, name), runtime.GOARCH)
		bin, ok := layerFile(t, img, "usr/local/bin/"+name)
		if !ok {
			t.Fatalf("%s: no binary in the layer", name)
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if want := name + " version v0.1.0 (commit " + commit + ")"; strings.TrimSpace(string(out)) != want {
			t.Errorf("%s --version = %q, want %q", name, out, want)
		}
	}
}

// TestReproducible: building the same commit again gives the same index digests and the same
// tarballs, byte for byte.
func TestReproducible(t *testing.T) {
	first := built(t)
	second := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), distArgs("images", second), &stdout, &stderr); code != 0 {
		t.Fatalf("dist images: exit %d\n%s", code, stderr.String())
	}
	for _, name := range Commands {
		d1, _ := readIndex(t, first, name).Digest()
		d2, _ := readIndex(t, second, name).Digest()
		t.Logf("%s: %s, %s", name, d1, d2)
		if d1 != d2 {
			t.Errorf("%s: two builds of one commit gave %s and %s", name, d1, d2)
		}
		if s1, s2 := fileSum(t, filepath.Join(first, "images", name+".tar")), fileSum(t, filepath.Join(second, "images", name+".tar")); s1 != s2 {
			t.Errorf("%s.tar differs between builds: %s, %s", name, s1, s2)
		}
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestPush: `dist push` to a real registry (distribution's, from `make tools`) on a loopback
// port, then each index pulled back by digest is the index built.
func TestPush(t *testing.T) {
	registry := testenv.Tool(t, "registry")
	dir := built(t)
	addr := testenv.FreeAddr(t)
	cfg := filepath.Join(t.TempDir(), "config.yml")
	storage := t.TempDir()
	if err := os.WriteFile(cfg, []byte("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "+storage+
		"\nhttp:\n  addr: "+addr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(registry, "serve", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	testenv.Eventually(t, 30*time.Second, "the registry answers /v2/", func() error {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	// No credentials of the machine's user are read: the keychain looks in an empty config.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"push", "--out", dir, "--registry", addr + "/sandbox-gitops"}, &stdout, &stderr); code != 0 {
		t.Fatalf("dist push: exit %d\n%s", code, stderr.String())
	}
	pushed := regexp.MustCompile(`(?m)^(\S+)@(sha256:[0-9a-f]{64})$`).FindAllStringSubmatch(stdout.String(), -1)
	if len(pushed) != len(Commands) {
		t.Fatalf("dist push printed %q, want one reference by digest per image", stdout.String())
	}
	for i, cmdName := range Commands {
		want, _ := readIndex(t, dir, cmdName).Digest()
		if pushed[i][1] != addr+"/sandbox-gitops/"+cmdName || pushed[i][2] != want.String() {
			t.Errorf("pushed %s@%s, want %s/sandbox-gitops/%s@%s", pushed[i][1], pushed[i][2], addr, cmdName, want)
		}
		ref, err := name.NewDigest(pushed[i][1] + "@" + pushed[i][2])
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pulling %s back: %v", ref, err)
		}
		if got, _ := idx.Digest(); got != want {
			t.Errorf("%s pulled back as %s", ref, got)
		}
		tag, _ := name.NewTag(addr + "/sandbox-gitops/" + cmdName + ":v0.1.0")
		if d, err := remote.Head(tag); err != nil || d.Digest != want {
			t.Errorf("tag %s: %v, %v; want %s", tag, d, err, want)
		}
	}
}

var imageLine = regexp.MustCompile(`(?m)^\s*(?:- )?image: (\S+)$`)

// TestRelease: the release of v0.1.0 has its files and SHA256SUMS verifies them; every image
// reference is pinned by digest, the digest of the index built for that version.
func TestRelease(t *testing.T) {
	dir := built(t)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `sum  file`", line)
		}
		listed = append(listed, file)
		if got := fileSum(t, filepath.Join(dir, file)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", file, got, sum)
		}
	}
	if strings.Join(listed, " ") != "argocd-cmp.yaml install.yaml router.yaml sandbox-gitops-0.1.0.tgz" {
		t.Errorf("SHA256SUMS lists %v", listed)
	}
	digests := map[string]string{}
	for _, name := range Commands {
		d, _ := readIndex(t, dir, name).Digest()
		digests["ghcr.io/sandbox-gitops/"+name+":v0.1.0"] = d.String()
	}
	for _, file := range listed {
		if !strings.HasSuffix(file, ".yaml") {
			continue // the chart: TestChart renders it
		}
		b, _ := os.ReadFile(filepath.Join(dir, file))
		refs := imageLine.FindAllStringSubmatch(string(b), -1)
		if len(refs) == 0 {
			t.Errorf("%s names no image", file)
		}
		for _, r := range refs {
			repoTag, digest, ok := strings.Cut(r[1], "@")
			if !ok || digests[repoTag] == "" || digest != digests[repoTag] {
				t.Errorf("%s: image %s is not pinned to the digest of the index built (%v)", file, r[1], digests)
			}
		}
	}
	if !strings.Contains(releaseOut, "wrote ") {
		t.Errorf("dist release said:\n%s", releaseOut)
	}
}

// TestBadVersion: a version that is not semver vX.Y.Z[-pre] is refused before anything is built,
// exit 2, with the form wanted in the message.
func TestBadVersion(t *testing.T) {
	for _, v := range []string{"0.1.0", "v0.1", "v0.1.0+meta", "latest", ""} {
		out := t.TempDir()
		args := distArgs("release", out)
		args[6] = v
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "vMAJOR.MINOR.PATCH") {
			t.Errorf("--version %q: exit %d, stderr %q; want 2 and the form wanted", v, code, stderr.String())
		}
		if entries, _ := os.ReadDir(out); len(entries) > 0 {
			t.Errorf("--version %q wrote %d entries", v, len(entries))
		}
	}
}

// helm runs the helm that `make tools` built (skipping the test, with the reason, where there is
// none), with a configuration of its own and no cluster.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := testenv.HelmCommand(t, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// objects decodes a multi-document YAML stream into its objects keyed kind/name.
func objects(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatal(err)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%v/%v", o["kind"], meta["name"])] = o
	}
}

// TestChart: the release packages the Helm chart as sandbox-gitops-0.1.0.tgz, whose appVersion
// is the release's and which `helm template` renders into the Deployment install.yaml has,
// spec for spec: the same controller image, pinned by the same digest. helm lint --strict finds
// nothing in it.
func TestChart(t *testing.T) {
	dir := built(t)
	tgz := filepath.Join(dir, "sandbox-gitops-0.1.0.tgz")
	if _, err := os.Stat(tgz); err != nil {
		t.Fatalf("the release has no chart: %v", err)
	}

	var chart struct{ Name, Version, AppVersion string }
	if err := yaml.Unmarshal(helm(t, "show", "chart", tgz), &chart); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(struct{ Name, Version, AppVersion string }{"sandbox-gitops", "0.1.0", "v0.1.0"}, chart); diff != "" {
		t.Errorf("helm show chart (-want +got):\n%s", diff)
	}

	install, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const deployment = "Deployment/sandbox-gitops-controller"
	want := objects(t, install)[deployment]
	got := objects(t, helm(t, "template", "sandbox-gitops", tgz, "--namespace", "sandbox-gitops-system"))[deployment]
	if want == nil || got == nil {
		t.Fatalf("no %s in install.yaml (%v) or in the chart's rendering (%v)", deployment, want != nil, got != nil)
	}
	image := func(o map[string]any) any {
		return o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
	}
	d, _ := readIndex(t, dir, "sandbox-controller").Digest()
	pinned := "ghcr.io/sandbox-gitops/sandbox-controller:v0.1.0@" + d.String()
	if image(want) != pinned {
		t.Fatalf("install.yaml's controller image is %v, want %s", image(want), pinned)
	}
	if diff := cmp.Diff(pinned, image(got)); diff != "" {
		t.Errorf("the packaged chart's controller image (-install.yaml +chart):\n%s", diff)
	}
	if diff := cmp.Diff(want["spec"], got["spec"]); diff != "" {
		t.Errorf("the packaged chart's Deployment spec (-install.yaml +chart):\n%s", diff)
	}
	labels := got["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["app.kubernetes.io/version"] != "v0.1.0" || labels["helm.sh/chart"] != "sandbox-gitops-0.1.0" {
		t.Errorf("the chart's labels name version %v, chart %v; want v0.1.0, sandbox-gitops-0.1.0", labels["app.kubernetes.io/version"], labels["helm.sh/chart"])
	}

	lint := string(helm(t, "lint", "--strict", "--namespace", "sandbox-gitops-system", tgz))
	if !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") {
		t.Errorf("helm lint --strict:\n%s", lint)
	}
	for _, line := range strings.Split(lint, "\n") {
		if strings.HasPrefix(line, "[WARNING]") || strings.HasPrefix(line, "[ERROR]") {
			t.Errorf("helm lint: %s", line)
		}
	}
}
