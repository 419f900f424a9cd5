// Package docs holds the documentation's test: every command in README.md and docs/gitops.md is
// run exactly as written, and every file of the example tree they show is the file in
// docs/example.
package docs

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var documents = []string{"README.md", filepath.Join("docs", "gitops.md"), filepath.Join("docs", "controller.md")}

// walkThroughs are the documents that walk through the example tree, so show each of its files.
var walkThroughs = map[string]bool{"README.md": true, filepath.Join("docs", "gitops.md"): true}

// notRun are the commands the test cannot run, with the reason.
var notRun = map[string]string{
	"make test": "it is the test suite that runs this test",
	"go run ./cmd/sandbox-router --kubeconfig ~/.kube/config --listen 127.0.0.1:8080":                       "it needs a cluster; cmd/sandbox-router's TestAgainstAPIServer runs the binary against a real API server",
	"curl -H 'X-Sandbox-ID: my-sandbox' -H 'X-Sandbox-Namespace: team-a' http://127.0.0.1:8080/":            "it needs the router above running against a cluster; router's tests send the same headers",
	"helm install sandbox-gitops dist/sandbox-gitops-X.Y.Z.tgz -n sandbox-gitops-system --create-namespace": helmSection,
	"kubectl label namespace sandbox-gitops-system pod-security.kubernetes.io/enforce=restricted":           helmSection,
	"helm uninstall sandbox-gitops -n sandbox-gitops-system --wait":                                         helmSection,
	"kubectl delete crd sandboxes.agents.x-k8s.io sandboxtemplates.extensions.agents.x-k8s.io sandboxclaims.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io sandboxrenders.render.sandbox-gitops.dev": helmSection,
	"kubectl delete namespace sandbox-gitops-system":                                                      helmSection,
	"kubectl apply --server-side --field-manager=sandbox-render-plugin -n argocd -f dist/argocd-cmp.yaml": "it needs a cluster with Argo CD and a release; e2e's TestInstall (make e2e) runs docs/gitops.md's Argo CD section as written against Argo CD's repo-server Deployment on the local cluster, with the release's dist/",
	"make cluster":                                                                    "it starts a cluster; internal/cluster's TestCluster starts the same one in-process",
	"make cluster REAL_NODE=1":                                                        "it starts a cluster with a real node as root; internal/cluster's TestRealNode (make e2e-node) starts the same one in-process",
	"export KUBECONFIG=$PWD/.cluster/kubeconfig":                                      "it only names the cluster's kubeconfig for the commands a user runs next",
	"kubectl apply --server-side -f dist/install.yaml":                                "it needs a cluster; hack/dist's TestRelease checks what install.yaml holds",
	"kubectl get pods -n sandbox-gitops-system":                                       "it needs a cluster with the release installed",
	"kubectl logs -n sandbox-gitops-system deploy/sandbox-gitops-controller":          "it needs a cluster with the release installed",
	"make cluster-down":                                                               "it stops the cluster that make cluster started; TestCluster checks the stop",
	"./bin/kustomize build config/default | kubectl apply --server-side -f -":         "it needs a cluster; controller's TestConfigDefaultBuilds builds config/default, and e2e's TestInstall applies the release made from it",
	"make bench-scale":                                                                benchScale,
	"go test -run '^$' -bench 'ScaleClaims' -benchtime 1x -timeout 120m ./scale/":     benchScale,
	"go test -run '^$' -bench 'ScaleThroughput' -benchtime 1x -timeout 120m ./scale/": benchScale,
	"go test -run '^$' -bench 'ScaleConverge' -benchtime 1x -timeout 180m ./scale/":   benchScale,

	// router.yaml's namespace, upstream's, is not in the file: created first.
	"kubectl create namespace agent-sandbox-system --dry-run=client -o yaml | kubectl apply --server-side -f -": "it needs a cluster; e2e's applyRouter (make e2e) sends what it sends before router.yaml, and cmd/sandbox-router's TestAgainstAPIServer twice before the base",
	"kubectl apply --server-side -f dist/router.yaml":                                                           "it needs a cluster with the namespace above; e2e's TestInstall (make e2e) applies the release's router.yaml",
}

// helmSection is why the README's Helm commands are not run here.
const helmSection = "it needs a cluster and a release; e2e's TestInstallRealNode (make e2e-node) runs the README's Helm section as written, X.Y.Z being the release's version, on the real node"

// benchScale is why the scale benchmarks' commands are not run here.
const benchScale = "it runs for about an hour on 100 kwok Nodes; make test runs the same three benchmarks once at a small size"

var (
	// shellBlock is a ```sh block; one marked <!-- local-cluster --> or <!-- real-node --> is a
	// script that needs that cluster, which TestLocalClusterSection or TestRealNodeSection runs
	// whole instead of TestDocCommands. The marker is the first group, the script the third.
	shellBlock = regexp.MustCompile("(?s)(<!-- (local-cluster|real-node) -->\n)?```sh\n(.*?)```")
	fileBlock  = regexp.MustCompile("(?s)<!-- (docs/example/[^ ]+) -->\n```yaml\n(.*?)```")
)

// TestExampleTreeInTheDocs: each example file shown in the docs is the file the commands use.
func TestExampleTreeInTheDocs(t *testing.T) {
	root := testenv.RepoRoot()
	for _, doc := range documents {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		shown := map[string]bool{}
		for _, m := range fileBlock.FindAllSubmatch(b, -1) {
			name := string(m[1])
			shown[name] = true
			want, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				t.Errorf("%s shows %s, which does not exist: %v", doc, name, err)
				continue
			}
			if diff := cmp.Diff(string(want), string(m[2])); diff != "" {
				t.Errorf("%s shows %s differently (-file +doc):\n%s", doc, name, diff)
			}
		}
		for _, f := range []string{"template.yaml", "pool.yaml", "claims.yaml"} {
			if walkThroughs[doc] && !shown["docs/example/"+f] {
				t.Errorf("%s does not show docs/example/%s", doc, f)
			}
		}
	}
}

// TestDocCommands runs every ```sh block of the docs, line by line, in a copy of the repository
// whose ./bin holds the tools `make tools` built, as a user following the docs on a fresh clone
// would: README.md first, then docs/gitops.md and docs/controller.md, in the same copy. Every command must succeed.
func TestDocCommands(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	root := testenv.RepoRoot()
	clone := copyRepo(t, root)
	if err := os.MkdirAll(filepath.Join(clone, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kustomize, filepath.Join(clone, "bin", "kustomize")); err != nil {
		t.Fatal(err)
	}
	gitInit := exec.Command("git", "init", "-q")
	gitInit.Dir = clone
	if out, err := gitInit.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	for _, doc := range documents {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, doc))
			if err != nil {
				t.Fatal(err)
			}
			var script []string
			for _, m := range shellBlock.FindAllSubmatch(b, -1) {
				if len(m[1]) > 0 {
					continue // TestLocalClusterSection's or TestRealNodeSection's
				}
				for _, line := range strings.Split(strings.TrimSpace(string(m[3])), "\n") {
					line = strings.TrimSpace(line) // a block inside a list item is indented
					if reason, skip := notRun[line]; skip {
						t.Logf("not run: %s (%s)", line, reason)
						continue
					}
					script = append(script, line)
				}
			}
			if len(script) == 0 {
				t.Fatalf("%s has no commands", doc)
			}
			for _, line := range script {
				cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
				cmd.Dir = clone
				cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=docs", "GIT_AUTHOR_EMAIL=docs@example.com",
					"GIT_COMMITTER_NAME=docs", "GIT_COMMITTER_EMAIL=docs@example.com")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: `%s` failed: %v\nstdout:\n%s\nstderr:\n%s", doc, line, err, stdout.String(), stderr.String())
				}
			}
		})
	}
}

// copyRepo copies the files git tracks, and the ones it would track, into a directory (not bin/
// or .git), as a fresh clone has them. The directory is the same on every run for the same
// repository, emptied first, so that `make build` there finds its compiled packages in Go's build
// cache (the cache keys on the directory) and the test stays fast.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	clone := filepath.Join(os.TempDir(), fmt.Sprintf("sandbox-gitops-docs-%x", sha256.Sum256([]byte(root)))[:len("sandbox-gitops-docs-")+12])
	if err := os.RemoveAll(clone); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(clone) })
	ls := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(clone, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return clone
}
