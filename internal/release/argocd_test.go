package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// cmpDir is the Argo CD plugin's source, which argocd-cmp.yaml is built from.
const cmpDir = "gitops/argocd/cmp"

// renderImage is the sandbox-render image of a made-up release, as argocd-cmp.yaml pins it.
var renderImage = Image{Name: DefaultRegistry + "/sandbox-render", Repository: DefaultRegistry + "/sandbox-render",
	Tag: "v0.1.0", Digest: "sha256:" + strings.Repeat("ef", 32)}

// withImage is a copy of the sidecar patch (a Deployment) with the sandbox-render container's
// image set to ref.
func withImage(t *testing.T, patch map[string]any, ref string) map[string]any {
	t.Helper()
	var out map[string]any
	b, _ := yaml.Marshal(patch)
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	containers := out["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	n := 0
	for _, c := range containers {
		if c := c.(map[string]any); c["name"] == "sandbox-render" {
			c["image"] = ref
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s/repo-server-patch.yaml has %d containers named sandbox-render, want 1", cmpDir, n)
	}
	return out
}

// byKind decodes a multi-document stream into its objects keyed kind/name.
func byKind(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if o == nil {
			continue
		}
		out[o["kind"].(string)+"/"+o["metadata"].(map[string]any)["name"].(string)] = o
	}
	return out
}

// TestArgoCDPlugin: argocd-cmp.yaml, what docs/gitops.md installs, is exactly plugin.yaml as
// the ConfigMap sandbox-render-plugin and repo-server-patch.yaml with the sidecar's image
// pinned to the release's, nothing more; and the kustomization repo-server-patch.yaml's comment
// shows, with the image pinned as it says, puts the same sidecar into an argocd-repo-server.
func TestArgoCDPlugin(t *testing.T) {
	root := testenv.RepoRoot()
	plugin, err := os.ReadFile(filepath.Join(root, cmpDir, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patchYAML, err := os.ReadFile(filepath.Join(root, cmpDir, "repo-server-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := yaml.Unmarshal(patchYAML, &patch); err != nil {
		t.Fatal(err)
	}
	sidecar := withImage(t, patch, renderImage.Ref())
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "sandbox-render-plugin"},
		"data": map[string]any{"plugin.yaml": string(plugin)}}

	t.Run("argocd-cmp.yaml", func(t *testing.T) {
		files, err := Manifests(root, "v0.1.0", []Image{renderImage})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]any{"ConfigMap/sandbox-render-plugin": configMap, "Deployment/argocd-repo-server": sidecar}
		if diff := cmp.Diff(want, byKind(t, string(files["argocd-cmp.yaml"]))); diff != "" {
			t.Errorf("argocd-cmp.yaml against plugin.yaml and repo-server-patch.yaml with the image pinned (-sources +argocd-cmp.yaml):\n%s", diff)
		}
	})

	t.Run("the kustomization in repo-server-patch.yaml's comment", func(t *testing.T) {
		// The comment's block: the lines after "#   patches:" up to the next bare "#".
		var k []string
		in := false
		for _, line := range strings.Split(string(patchYAML), "\n") {
			if line == "#   patches:" {
				in = true
			}
			if in && line == "#" {
				break
			}
			if in {
				k = append(k, strings.TrimPrefix(line, "#   "))
			}
		}
		if len(k) == 0 {
			t.Fatalf("%s/repo-server-patch.yaml's comment shows no kustomization (#   patches: ...)", cmpDir)
		}
		kustomization := strings.Join(k, "\n") + "\n"
		for placeholder, v := range map[string]string{"vX.Y.Z": renderImage.Tag, "sha256:...": renderImage.Digest} {
			if !strings.Contains(kustomization, placeholder) {
				t.Fatalf("the comment's kustomization has no %s to pin the image with:\n%s", placeholder, kustomization)
			}
			kustomization = strings.ReplaceAll(kustomization, placeholder, v)
		}
		// What the user's kustomization installs Argo CD from, reduced to the repo-server with
		// its own container.
		repoServer := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: argocd-repo-server\nspec:\n" +
			"  template:\n    spec:\n      containers:\n      - name: argocd-repo-server\n        image: quay.io/argoproj/argocd:v3.0.0\n"
		dir := t.TempDir()
		for name, b := range map[string]string{
			"kustomization.yaml":      "resources: [argocd-repo-server.yaml]\n" + kustomization,
			"argocd-repo-server.yaml": repoServer,
			"plugin.yaml":             string(plugin),
			"repo-server-patch.yaml":  string(patchYAML),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build of the comment's kustomization: %v\n%s", err, kustomization)
		}
		y, err := m.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		got := byKind(t, string(y))
		if diff := cmp.Diff(configMap, got["ConfigMap/sandbox-render-plugin"]); diff != "" {
			t.Errorf("the plugin's ConfigMap (-want +got):\n%s", diff)
		}
		var containers []any
		if d := got["Deployment/argocd-repo-server"]; d != nil {
			containers = d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
		}
		var render any
		for _, c := range containers {
			if c.(map[string]any)["name"] == "sandbox-render" {
				render = c
			}
		}
		want := sidecar["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
		if diff := cmp.Diff(want, render); diff != "" {
			t.Errorf("the sidecar in argocd-repo-server (-argocd-cmp.yaml's +the comment's kustomization):\n%s", diff)
		}
		if len(containers) != 2 {
			t.Errorf("argocd-repo-server has %d containers, want its own and the sidecar", len(containers))
		}
	})
}
