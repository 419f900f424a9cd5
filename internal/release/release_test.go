package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestCheckVersion: semver vMAJOR.MINOR.PATCH[-PRERELEASE] passes; anything else is refused
// with a message that shows the form wanted.
func TestCheckVersion(t *testing.T) {
	cases := map[string]struct {
		reason string
		ok     bool
	}{
		"v0.1.0":        {reason: "a release", ok: true},
		"v1.20.3-rc.1":  {reason: "a pre-release", ok: true},
		"v0.1.0-dirty":  {reason: "what Effective makes of a dirty tree is itself valid", ok: true},
		"0.1.0":         {reason: "no v"},
		"v0.1":          {reason: "no patch"},
		"v01.1.0":       {reason: "leading zero"},
		"v0.1.0-rc.01":  {reason: "numeric pre-release identifier with a leading zero"},
		"v0.1.0+build5": {reason: "build metadata cannot be an image tag"},
		"v0.1.0-":       {reason: "empty pre-release"},
		"latest":        {reason: "not a version"},
		"":              {reason: "empty"},
	}
	for v, tc := range cases {
		err := CheckVersion(v)
		if (err == nil) != tc.ok {
			t.Errorf("%q (%s): error %v, want ok=%v", v, tc.reason, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH") && !strings.Contains(err.Error(), "leading zero") {
			t.Errorf("%q: the message does not say what is wanted: %v", v, err)
		}
	}
	if got := Effective("v0.1.0", true); got != "v0.1.0-dirty" {
		t.Errorf("Effective dirty = %q", got)
	}
}

var imageLine = regexp.MustCompile(`(?m)^\s*(?:- )?image: (\S+)$`)

// TestManifests: each release file is the build of its tree with every image of ours pinned to
// the reference given, and SHA256SUMS lists them.
func TestManifests(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	var images []Image
	for _, n := range []string{"sandbox-controller", "sandbox-router", "sandbox-render"} {
		images = append(images, Image{Name: DefaultRegistry + "/" + n, Repository: "registry.example/x/" + n, Tag: "v0.1.0", Digest: d})
	}
	files, err := Manifests(testenv.RepoRoot(), "v0.1.0", images)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"install.yaml":    {"kind: CustomResourceDefinition", "kind: Namespace", "name: sandbox-gitops-controller", "kind: Secret", "kind: Service", "kind: ClusterRole"},
		"router.yaml":     {"name: sandbox-router", "namespace: agent-sandbox-system", "# kubectl create namespace agent-sandbox-system --dry-run=client -o yaml | kubectl apply --server-side -f -\n"},
		"argocd-cmp.yaml": {"name: sandbox-render-plugin", "plugin.yaml: |", "name: argocd-repo-server"},
	}
	for file, needles := range want {
		y := string(files[file])
		for _, n := range needles {
			if !strings.Contains(y, n) {
				t.Errorf("%s has no %q", file, n)
			}
		}
		refs := imageLine.FindAllStringSubmatch(y, -1)
		if len(refs) == 0 {
			t.Errorf("%s names no image", file)
		}
		for _, r := range refs {
			if !strings.HasPrefix(r[1], "registry.example/x/sandbox-") || !strings.HasSuffix(r[1], ":v0.1.0@"+d) {
				t.Errorf("%s: image %s is not pinned to the release", file, r[1])
			}
		}
	}
	// router.yaml holds no Namespace: its namespace is upstream's agent-sandbox-system, which
	// `kubectl delete -f router.yaml` must leave, with whatever else runs in it.
	if strings.Contains(string(files["router.yaml"]), "\nkind: Namespace\n") {
		t.Error("router.yaml holds a Namespace")
	}
	// kubectl applies a file in order: every Namespace before anything in it, the CRDs before
	// anything but Namespaces.
	for file, y := range files {
		seenNamespaces := map[string]bool{}
		sawOther := false
		for i, doc := range strings.Split(string(y), "\n---\n") {
			kind := regexp.MustCompile(`(?m)^kind: (\S+)$`).FindStringSubmatch(doc)
			if kind == nil {
				continue
			}
			name := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(doc)
			ns := regexp.MustCompile(`(?m)^  namespace: (\S+)$`).FindStringSubmatch(doc)
			switch {
			case kind[1] == "Namespace" && name != nil:
				seenNamespaces[name[1]] = true
			case kind[1] == "CustomResourceDefinition" && sawOther:
				t.Errorf("%s: document %d, CRD %v, comes after other kinds", file, i, name)
			}
			sawOther = sawOther || (kind[1] != "CustomResourceDefinition" && kind[1] != "Namespace")
			if ns != nil && strings.Contains(string(y), "kind: Namespace\nmetadata:\n") && !seenNamespaces[ns[1]] {
				t.Errorf("%s: document %d, %s %v, comes before its Namespace %s", file, i, kind[1], name, ns[1])
			}
		}
	}
	dir := t.TempDir()
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sums), "\n"); n != len(Artifacts) {
		t.Errorf("SHA256SUMS has %d lines, want %d:\n%s", n, len(Artifacts), sums)
	}
}
