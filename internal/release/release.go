// Package release makes the files of a release: the install manifests with every image pinned
// by digest, and their checksums. It builds the manifests with the kustomize API in process
// (`kustomize build` with an images override), from the same config/, bases/ and gitops/ trees
// users build themselves (kubebuilder's build-installer does the same from config/), so a release
// can never say something the repository does not. Chart packages the Helm chart the same way:
// the repository's, with the release's version and controller image (chart.go).
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// DefaultRegistry is where the manifests in the repository say the images are.
const DefaultRegistry = "ghcr.io/sandbox-gitops"

// semverRE is `vMAJOR.MINOR.PATCH[-PRERELEASE]` of semver.org; build metadata (+...) is refused
// because the version is also the image tag, and a tag cannot hold a '+'.
var semverRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$`)

// CheckVersion refuses a version that is not semver `vMAJOR.MINOR.PATCH[-PRERELEASE]`.
func CheckVersion(v string) error {
	m := semverRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("version %q: want semver vMAJOR.MINOR.PATCH or vMAJOR.MINOR.PATCH-PRERELEASE, e.g. v0.1.0 or v0.2.0-rc.1 (no +build metadata: the version is the image tag)", v)
	}
	for _, id := range strings.Split(m[4], ".") {
		if len(id) > 1 && id[0] == '0' && strings.Trim(id, "0123456789") == "" {
			return fmt.Errorf("version %q: pre-release identifier %q has a leading zero, which semver forbids", v, id)
		}
	}
	return nil
}

// Effective is the version binaries, labels and image tags carry: v, or v-dirty when the tree
// had changes git does not have (git describe --dirty's convention). A -dirty suffix (a
// pre-release, sorting before v) rather than +dirty (build metadata), because image tags cannot
// hold a '+'; a dirty build must never be mistaken for the release.
func Effective(v string, dirty bool) string {
	if dirty {
		return v + "-dirty"
	}
	return v
}

// Image is one image the manifests name, and the reference a release pins it to.
type Image struct {
	// Name is the image name in the repository's manifests (ghcr.io/sandbox-gitops/<binary>).
	Name string
	// Repository, Tag and Digest are the pinned reference: Repository:Tag@Digest.
	Repository, Tag, Digest string
}

// Ref is the image reference the manifests get.
func (i Image) Ref() string { return i.Repository + ":" + i.Tag + "@" + i.Digest }

// Artifact is one manifest file of a release, and the tree it is built from.
type Artifact struct {
	File string
	// Dir is the kustomization (relative to the repository root) the file is the build of; for
	// gitops/argocd/cmp, which is a plugin config and a patch rather than a kustomization, the
	// ConfigMap made from plugin.yaml and the sidecar patch (see Manifests).
	Dir string
	// Apply is how the header comment tells users to apply it: commands, one a line.
	Apply string
}

// Artifacts are the manifest files of every release.
var Artifacts = []Artifact{
	{File: "install.yaml", Dir: "config/default", Apply: "kubectl apply --server-side -f install.yaml"},
	// The router's namespace is upstream's agent-sandbox-system, which the file does not hold
	// (deleting the file must not delete upstream's namespace): created first, idempotently.
	{File: "router.yaml", Dir: "bases/router", Apply: "kubectl create namespace agent-sandbox-system --dry-run=client -o yaml | kubectl apply --server-side -f -\n" +
		"kubectl apply --server-side -f router.yaml"},
	{File: "argocd-cmp.yaml", Dir: "gitops/argocd/cmp", Apply: "kubectl apply --server-side --field-manager=sandbox-render-plugin -n argocd -f argocd-cmp.yaml (after Argo CD: it adds the sidecar to argocd-repo-server)"},
}

// Manifests builds every Artifact from the repository at root with the images pinned, and
// returns them by file name. Each begins with a comment naming the version and how to apply it.
//
// argocd-cmp.yaml is the ConfigMap sandbox-render-plugin holding plugin.yaml and the
// argocd-repo-server Deployment patch, without a namespace: applied server-side into Argo CD's
// namespace, the partial Deployment merges into the installed one (containers and volumes are
// keyed by name), as the patch does in a kustomization.
func Manifests(root, version string, images []Image) (map[string][]byte, error) {
	tmp, err := os.MkdirTemp("", "sandbox-gitops-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var overrides []types.Image
	for _, i := range images {
		overrides = append(overrides, types.Image{Name: i.Name, NewName: i.Repository, NewTag: i.Tag, Digest: i.Digest})
	}
	out := map[string][]byte{}
	for _, a := range Artifacts {
		k := types.Kustomization{
			TypeMeta: types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
			Images:   overrides,
		}
		dir := filepath.Join(tmp, strings.TrimSuffix(a.File, ".yaml"))
		// kustomize takes no absolute kustomization roots: the overlay names the tree relative to
		// itself (paths outside it are why LoadRestrictionsNone is set below).
		src, err := filepath.Rel(dir, filepath.Join(absRoot, filepath.FromSlash(a.Dir)))
		if err != nil {
			return nil, err
		}
		src = filepath.ToSlash(src)
		if a.Dir == "gitops/argocd/cmp" {
			k.Resources = []string{src + "/repo-server-patch.yaml"}
			k.ConfigMapGenerator = []types.ConfigMapArgs{{GeneratorArgs: types.GeneratorArgs{
				Name:          "sandbox-render-plugin",
				KvPairSources: types.KvPairSources{FileSources: []string{"plugin.yaml=" + src + "/plugin.yaml"}},
				Options:       &types.GeneratorOptions{DisableNameSuffixHash: true},
			}}}
		} else {
			k.Resources = []string{src}
		}
		b, err := yaml.Marshal(k)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
			return nil, err
		}
		opts := krusty.MakeDefaultOptions()
		// The overlay lives in a temporary directory and names the trees in the repository.
		opts.LoadRestrictions = types.LoadRestrictionsNone
		// The order `kustomize build` gives by default (Namespaces, CRDs, ServiceAccounts and
		// RBAC before the workloads), not file order: kubectl applies a file in its order, and a
		// namespaced object before its Namespace fails.
		opts.Reorder = krusty.ReorderOptionLegacy
		m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, fmt.Errorf("building %s for %s: %w", a.Dir, a.File, err)
		}
		y, err := m.AsYaml()
		if err != nil {
			return nil, err
		}
		head := fmt.Sprintf("# sandbox-gitops %s: %s, built from %s.\n# %s\n", version, a.File, a.Dir, strings.ReplaceAll(a.Apply, "\n", "\n# "))
		out[a.File] = append([]byte(head), y...)
	}
	return out, nil
}

// Write writes the files into dir and SHA256SUMS over them, sorted by name, in the format
// `sha256sum -c` checks. Only these names are written: whatever else dir holds (dist/images) is
// left alone.
func Write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	var sums bytes.Buffer
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return err
		}
		h := sha256.Sum256(files[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(h[:]), n)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums.Bytes(), 0o644)
}
