package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// argoCDRepoServer stands for the argocd-repo-server Deployment of Argo CD's install.yaml, in
// the parts the plugin's patch meets: its name and selector, its own container, and the two
// emptyDir volumes the sidecar mounts (var-files, where Argo CD's copyutil init container puts
// argocd-cmp-server, and plugins, the cmp-server's sockets). Argo CD's images cannot run here
// (there is no registry to pull them from), so the test installs this shape, with kubectl's
// server-side apply as Argo CD's installation instructions do, and runs the document's command
// against it.
const argoCDRepoServer = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
  labels:
    app.kubernetes.io/name: argocd-repo-server
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: argocd-repo-server
  template:
    metadata:
      labels:
        app.kubernetes.io/name: argocd-repo-server
    spec:
      initContainers:
      - name: copyutil
        image: quay.io/argoproj/argocd:v3.2.0
        command: [/bin/cp, -n, /usr/local/bin/argocd, /var/run/argocd/argocd-cmp-server]
        volumeMounts:
        - name: var-files
          mountPath: /var/run/argocd
      containers:
      - name: argocd-repo-server
        image: quay.io/argoproj/argocd:v3.2.0
        args: [/usr/local/bin/argocd-repo-server]
        volumeMounts:
        - name: plugins
          mountPath: /home/argocd/cmp-server/plugins
      volumes:
      - name: var-files
        emptyDir: {}
      - name: plugins
        emptyDir: {}
`

// checkArgoCDPlugin runs docs/gitops.md's Argo CD commands as written, against Argo CD's
// repo-server as installed (argoCDRepoServer): the release's dist/argocd-cmp.yaml must add the
// ConfigMap and the sidecar, pinned to the release's sandbox-render image, and leave Argo CD's
// own container and volumes as they were, and the Deployment must roll out with both.
func checkArgoCDPlugin(t *testing.T, ctx context.Context, c *cluster.Cluster, k *kube, r *release) {
	const ns = "argocd"
	shell := newDocShell(t, r.dir, c.Kubeconfig, strings.NewReplacer())
	installed := filepath.Join(t.TempDir(), "argocd-repo-server.yaml")
	if err := os.WriteFile(installed, []byte(argoCDRepoServer), 0o644); err != nil {
		t.Fatal(err)
	}
	shell.run(t, ctx, []string{
		"kubectl create namespace " + ns,
		"kubectl apply --server-side --force-conflicts -n " + ns + " -f " + installed,
	})
	t.Cleanup(func() {
		if err := k.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	testenv.Eventually(t, timeout, "Argo CD's repo-server Available", func() error { return k.deploymentAvailable(ctx, ns, "argocd-repo-server") })

	for _, block := range sectionCommands(t, filepath.Join("docs", "gitops.md"), "## Argo CD") {
		shell.run(t, ctx, block)
	}

	d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, "argocd-repo-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	var containers, volumes []string
	var sidecar *corev1.Container
	for i, ctr := range spec.Containers {
		containers = append(containers, ctr.Name)
		if ctr.Name == "sandbox-render" {
			sidecar = &spec.Containers[i]
		}
	}
	for _, v := range spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	slices.Sort(volumes)
	if diff := cmp.Diff([]string{"argocd-repo-server", "sandbox-render"}, containers); diff != "" {
		t.Fatalf("argocd-repo-server's containers after the plugin (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"cmp-tmp", "plugins", "sandbox-render-plugin", "var-files"}, volumes); diff != "" {
		t.Errorf("argocd-repo-server's volumes after the plugin (-want +got):\n%s", diff)
	}
	if digest := r.digests["sandbox-render"]; digest == "" || !strings.HasSuffix(sidecar.Image, "@"+digest) {
		t.Errorf("the sidecar runs %s, not the release's sandbox-render image %s", sidecar.Image, digest)
	}
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "copyutil" {
		t.Errorf("argocd-repo-server's init containers after the plugin: %v, want Argo CD's copyutil", spec.InitContainers)
	}
	cm, err := k.cs.CoreV1().ConfigMaps(ns).Get(ctx, "sandbox-render-plugin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plugin, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "gitops", "argocd", "cmp", "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(plugin), cm.Data["plugin.yaml"]); diff != "" {
		t.Errorf("the ConfigMap's plugin.yaml against gitops/argocd/cmp/plugin.yaml (-repository +cluster):\n%s", diff)
	}
	testenv.Eventually(t, timeout, "argocd-repo-server rolled out with the sidecar", func() error {
		if err := k.deploymentAvailable(ctx, ns, "argocd-repo-server"); err != nil {
			return err
		}
		d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, "argocd-repo-server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != d.Status.Replicas {
			return fmt.Errorf("generation %d observed %d, %d of %d replicas updated",
				d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.Replicas)
		}
		return nil
	})
}
