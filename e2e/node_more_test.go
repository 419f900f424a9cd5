package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// burstSize: on the real node the leader's Pod is deleted during a burst of 20 claims, each a
// real Pod.
func (realNode) burstSize() int { return 20 }

// checkRouterAuthz turns the router's --authz=kubernetes on as bases/router/authz does (its RBAC,
// its flag), and checks a ServiceAccount token without RBAC on sandboxes/proxy is refused with
// 403 while one with it gets through; then puts router.yaml back as released.
func checkRouterAuthz(t *testing.T, ctx context.Context, k *kube, r *release, base, sb string) {
	rbac, err := readManifest(filepath.Join(testenv.RepoRoot(), "bases", "router", "authz", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deployment *unstructured.Unstructured
	for _, o := range r.router {
		if o.GetKind() == "Deployment" {
			deployment = o
		}
	}
	if deployment == nil {
		t.Fatal("router.yaml has no Deployment")
	}
	withAuthz := deployment.DeepCopy()
	containers, _, _ := unstructured.NestedSlice(withAuthz.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	c["args"] = append(c["args"].([]any), "--authz=kubernetes")
	if err := unstructured.SetNestedSlice(withAuthz.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	k.apply(t, ctx, "the router's authz RBAC", installManager, rbac)
	k.apply(t, ctx, "router.yaml with --authz=kubernetes", installManager, []*unstructured.Unstructured{withAuthz})
	defer func() {
		k.apply(t, ctx, "router.yaml as released", installManager, []*unstructured.Unstructured{deployment})
		k.deleteAll(t, ctx, rbac)
		testenv.Eventually(t, timeout, "the router's Deployment available again", func() error {
			return k.deploymentAvailable(ctx, routerNamespace, routerName)
		})
	}()

	ns := exampleNamespace
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := k.cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := k.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	denied, allowed := token("caller-without-rbac"), token("caller-with-rbac")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "proxy-" + sb, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"get"}, ResourceNames: []string{sb}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proxy-" + sb, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "caller-with-rbac", Namespace: ns}}}
	if _, err := k.cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := func(tok string) (int, error) {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, base+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Header = sandboxHeader(sb)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Until every router Pod runs with the flag, an old one may still let the first token in.
	testenv.Eventually(t, 2*time.Minute, "a token without RBAC refused (403) and one with it let through (200)", func() error {
		if err := k.deploymentAvailable(ctx, routerNamespace, routerName); err != nil {
			return err
		}
		got := map[string]int{}
		for name, tok := range map[string]string{"without": denied, "with": allowed} {
			code, err := status(tok)
			if err != nil {
				return err
			}
			got[name] = code
		}
		if diff := cmp.Diff(map[string]int{"without": http.StatusForbidden, "with": http.StatusOK}, got); diff != "" {
			return fmt.Errorf("status by token (-want +got):\n%s", diff)
		}
		return nil
	})
}

// checkRenderImage runs the sandbox-render image as argocd-cmp.yaml's sidecar runs it (its
// securityContext, its generate command) on docs/example, in a Pod, and checks it prints the bytes
// the same binary prints on this machine: what Argo CD applies is what the preview showed.
func checkRenderImage(t *testing.T, ctx context.Context, k *kube, r *release) {
	cmp_, err := readManifest(filepath.Join(r.dir, "argocd-cmp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sidecar map[string]any
	for _, o := range cmp_ {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if c.(map[string]any)["name"] == "sandbox-render" {
				sidecar = c.(map[string]any)
			}
		}
	}
	if sidecar == nil {
		t.Fatal("argocd-cmp.yaml has no sandbox-render container")
	}
	example := filepath.Join(testenv.RepoRoot(), "docs", "example")
	files := map[string]string{}
	err = filepath.WalkDir(example, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[d.Name()] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := r.binaryFromImage(t, "sandbox-render", t.TempDir())
	local := exec.Command(bin, "build", ".")
	local.Dir = example
	var stdout, stderr bytes.Buffer
	local.Stdout, local.Stderr = &stdout, &stderr
	if err := local.Run(); err != nil {
		t.Fatalf("sandbox-render build docs/example here: %v: %s", err, stderr.String())
	}

	ns := "default"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "render-source", Namespace: ns}, Data: files}
	if _, err := k.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := sidecar["securityContext"].(map[string]any)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox-render", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "sandbox-render", Image: sidecar["image"].(string),
				Command:    []string{"sandbox-render", "build", "."},
				WorkingDir: "/src",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(sc["allowPrivilegeEscalation"].(bool)),
					RunAsNonRoot:             ptr.To(sc["runAsNonRoot"].(bool)),
					RunAsUser:                ptr.To(asInt64(t, sc["runAsUser"])),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "src", MountPath: "/src"}, {Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "src", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if _, err := k.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = k.cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		_ = k.cs.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})
	}()
	var phase corev1.PodPhase
	testenv.Eventually(t, 2*time.Minute, "the sandbox-render Pod finished", func() error {
		p, err := k.cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("still %s", phase)
		}
		return nil
	})
	logs, err := k.cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if phase != corev1.PodSucceeded {
		t.Fatalf("sandbox-render in its image %s:\n%s", phase, logs)
	}
	// The Pod's log is its stdout and stderr together; here stderr said nothing.
	if stderr.Len() > 0 {
		t.Logf("sandbox-render here also wrote to stderr:\n%s", stderr.String())
	}
	if diff := cmp.Diff(stdout.String()+stderr.String(), string(logs)); diff != "" {
		t.Fatalf("the image's build of docs/example differs from this machine's (-here +in the image):\n%s", diff)
	}
}

// packagedChartFile is the name of the chart the release packaged, the .tgz its SHA256SUMS lists.
func packagedChartFile(t *testing.T, dir string) string {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatalf("%v (run `make release`)", err)
	}
	var tgz string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if _, file, _ := strings.Cut(line, "  "); strings.HasSuffix(file, ".tgz") {
			tgz = file
		}
	}
	if tgz == "" {
		t.Fatalf("%s/SHA256SUMS lists no packaged chart (.tgz)", dir)
	}
	return tgz
}

// packagedChart unpacks the chart the release packaged into a directory of the test's (checkHelm
// changes a file of it), and returns the chart's directory.
func packagedChart(t *testing.T, dir string) string {
	t.Helper()
	tgz := packagedChartFile(t, dir)
	f, err := os.Open(filepath.Join(dir, tgz))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", tgz, err)
	}
	out := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", tgz, err)
		}
		if !filepath.IsLocal(h.Name) || h.Typeflag != tar.TypeReg {
			t.Fatalf("%s: entry %q (type %c) is not a file inside the chart", tgz, h.Name, h.Typeflag)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(out, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(out, "sandbox-gitops")
}

// checkHelm runs the README's "Install with Helm" commands as written, X.Y.Z standing for the
// release's chart version: it installs the release's packaged chart
// (dist/sandbox-gitops-X.Y.Z.tgz) on the real node with no value set, whose controller must be
// the image install.yaml pins, and labels the namespace restricted. Then it upgrades to that
// chart with a CRD changed (a test-only printer column), uninstalls it (the CRDs stay, as
// helm.sh/resource-policy: keep says) and installs it again under the same name, which takes the
// CRDs back. Last it runs the README's removal commands, which must leave nothing of ours.
func checkHelm(t *testing.T, ctx context.Context, c *cluster.Cluster, k *kube, r *release) {
	helm := testenv.Tool(t, "helm")
	tgz := packagedChartFile(t, r.dir)
	version := strings.TrimSuffix(strings.TrimPrefix(tgz, "sandbox-gitops-"), ".tgz")
	readme := newDocShell(t, r.dir, c.Kubeconfig, strings.NewReplacer("X.Y.Z", version))
	var install, remove [][]string
	for _, block := range sectionCommands(t, "README.md", "## Install with Helm") {
		if strings.HasPrefix(block[0], "helm uninstall") {
			remove = append(remove, block)
		} else {
			install = append(install, block)
		}
	}
	if len(install) == 0 || len(remove) == 0 {
		t.Fatalf("the README's Helm section has %d install and %d removal blocks; want both", len(install), len(remove))
	}
	chart := packagedChart(t, r.dir)
	ns := webhook.DefaultNamespace
	var pinned string
	for _, o := range r.install {
		if o.GetKind() == "Deployment" && o.GetName() == controllerName {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				pinned, _, _ = unstructured.NestedString(containers[0].(map[string]any), "image")
			}
		}
	}
	if digest := r.digests["sandbox-controller"]; digest == "" || !strings.HasSuffix(pinned, "@"+digest) {
		t.Fatalf("install.yaml's controller image is %q, not pinned to the release's sandbox-controller %s", pinned, r.digests["sandbox-controller"])
	}
	run := func(args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig", c.Kubeconfig)
		out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	again := []string{chart, "-n", ns, "--create-namespace", "--wait", "--timeout", "3m"}
	crdFiles, err := filepath.Glob(filepath.Join(chart, "templates", "generated", "customresourcedefinition-*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("the chart has no CRD templates (%v)", err)
	}
	var crds []string
	for _, f := range crdFiles {
		crds = append(crds, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "customresourcedefinition-"), ".yaml"))
	}
	columns := func() ([]string, error) {
		crd, err := getCRD(ctx, k, "sandboxes.agents.x-k8s.io")
		if err != nil {
			return nil, err
		}
		var names []string
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta1" {
				for _, col := range v.AdditionalPrinterColumns {
					names = append(names, col.Name)
				}
			}
		}
		return names, nil
	}

	for _, block := range install {
		readme.run(t, ctx, block)
	}
	testenv.Eventually(t, timeout, "the chart's controller Available", func() error { return k.deploymentAvailable(ctx, ns, controllerName) })
	d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, controllerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != pinned {
		t.Errorf("the packaged chart runs %s, install.yaml pins %s", got, pinned)
	}
	namespace, err := k.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := namespace.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("after the README's commands namespace %s enforces Pod Security %q, want restricted", ns, got)
	}

	sandboxes := filepath.Join(chart, "templates", "generated", "customresourcedefinition-sandboxes.agents.x-k8s.io.yaml")
	b, err := os.ReadFile(sandboxes)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "  - additionalPrinterColumns:\n"
	if bytes.Count(b, []byte(anchor)) == 0 {
		t.Fatalf("%s has no %q", sandboxes, anchor)
	}
	b = bytes.ReplaceAll(b, []byte(anchor), []byte(anchor+"    - jsonPath: .metadata.uid\n      name: E2E\n      type: string\n"))
	if err := os.WriteFile(sandboxes, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run(append([]string{"upgrade", "sandbox-gitops"}, again...)...)
	testenv.Eventually(t, timeout, "helm upgrade applied the changed CRD", func() error {
		cols, err := columns()
		if err != nil {
			return err
		}
		if !strings.Contains(strings.Join(cols, ","), "E2E") {
			return fmt.Errorf("columns %v have no E2E", cols)
		}
		return nil
	})

	run("uninstall", "sandbox-gitops", "-n", ns, "--wait")
	for _, name := range crds {
		if _, err := getCRD(ctx, k, name); err != nil {
			t.Errorf("after helm uninstall CRD %s: %v; the chart keeps its CRDs", name, err)
		}
	}
	if err := os.WriteFile(sandboxes, bytes.ReplaceAll(b, []byte("    - jsonPath: .metadata.uid\n      name: E2E\n      type: string\n"), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	run(append([]string{"install", "sandbox-gitops"}, again...)...)
	testenv.Eventually(t, timeout, "the CRDs taken back by the second install, without the column", func() error {
		cols, err := columns()
		if err != nil {
			return err
		}
		if strings.Contains(strings.Join(cols, ","), "E2E") {
			return fmt.Errorf("columns %v still have E2E", cols)
		}
		crd, err := getCRD(ctx, k, "sandboxes.agents.x-k8s.io")
		if err != nil {
			return err
		}
		if got := crd.Annotations["meta.helm.sh/release-name"]; got != "sandbox-gitops" {
			return fmt.Errorf("CRD sandboxes.agents.x-k8s.io names release %q", got)
		}
		return nil
	})
	testenv.Eventually(t, timeout, "the chart's controller Available again", func() error { return k.deploymentAvailable(ctx, ns, controllerName) })

	for _, block := range remove {
		readme.run(t, ctx, block)
	}
	for _, name := range crds {
		if _, err := getCRD(ctx, k, name); !apierrors.IsNotFound(err) {
			t.Errorf("after the README's removal commands CRD %s: %v, want not found", name, err)
		}
	}
	testenv.Eventually(t, timeout, "nothing of ours left after the chart", func() error { return leftovers(ctx, k) })
}

// getCRD reads a CRD as the cluster has it now.
func getCRD(ctx context.Context, k *kube, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	return crd, k.c.Get(ctx, client.ObjectKey{Name: name}, crd)
}

// asInt64 is a number of a decoded manifest, which JSON decoding gives as float64 and
// Kubernetes' own as int64.
func asInt64(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}
