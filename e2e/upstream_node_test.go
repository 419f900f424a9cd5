package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/e2e/upstream"
	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

const (
	// sdkNamespace is where both SDKs create their claims when told nothing else: the Go SDK's
	// defaultNamespace and the Python SDK's create_sandbox(namespace="default").
	sdkNamespace = "default"
	// sdkPool is the warm pool of sandboxd both SDKs claim from, upstream's sandboxd example's
	// name for it (examples/sandboxd-sandbox/deploy).
	sdkPool = "sandboxd-warmpool"
	// sdkModule is the Go SDK's test module and the Python SDK's driver.
	sdkModule = "hack/tools/agent-sandbox-sdk"
	// pythonSDK is the Python SDK in the module cache, beside the Go module it ships in.
	pythonSDK = "clients/python/agentic-sandbox-client"
	// stepPrefix starts a line of the SDK runs' output that reports a step's latency
	// (sdk_test.go's StepPrefix, k8shelper.py's).
	stepPrefix = "sdk-step\t"
)

// TestUpstreamRealNode is `make e2e-upstream-node`: what of upstream agent-sandbox needs a
// process in the sandbox's Pod, on a cluster with a real node where this repository's release
// runs from its images (the controller from install.yaml, the router from router.yaml in
// agent-sandbox-system) and upstream's sandboxd image, built from hack/tools.sh's sandboxd and
// Debian's busybox, is imported under the name upstream's test uses:
//   - upstream's own tests of upstream.RealNode, each alone and to its end (TestRunSandboxdSandbox:
//     kubectl port-forward to the Pod, sandboxd's REST filesystem and gRPC ProcessService);
//   - upstream's Go SDK (hack/tools/agent-sandbox-sdk) with its defaults and Runtime sandboxd:
//     a sandbox from a warm pool, a command, a file written and read, the sandbox deleted and
//     gone;
//   - upstream's Python SDK on its K8sHelper path with create_sandbox's defaults (Debian's
//     python3-kubernetes): a claim, Ready, the sandbox's name.
//
// Each SDK step's latency is printed in one table at the end.
func TestUpstreamRealNode(t *testing.T) {
	if os.Getenv(realNodeEnv) != "1" {
		t.Skipf("e2e-upstream-node: skipped: %s is not 1; `make e2e-upstream-node` runs this test", realNodeEnv)
	}
	bins := os.Getenv(upstreamBinEnv)
	if bins == "" {
		t.Skipf("e2e-upstream-node: skipped: %s is not set; `make e2e-upstream-node` builds upstream's suite and runs this test", upstreamBinEnv)
	}
	r := readRelease(t)
	bin := testenv.BinDir()
	sandboxd, err := filepath.EvalSymlinks(filepath.Join(bin, "sandboxd"))
	if err != nil {
		testenv.Missing(t, "sandboxd not found in %s (%v); run `make tools`", bin, err)
	}
	out := os.Getenv(upstreamOutEnv)
	if out == "" {
		out = t.TempDir()
	}
	if out, err = filepath.Abs(out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-artifacts", "node-work", "node-events"} {
		if err := os.RemoveAll(filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(out, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	began := time.Now()
	image := filepath.Join(dir, "sandboxd.tar")
	if err := cluster.BuildImage(upstream.SandboxdNodeImage(sandboxd, "/bin/busybox"), image); err != nil {
		t.Fatal(err)
	}
	archives := []string{image}
	for _, name := range images {
		archives = append(archives, filepath.Join(r.dir, "images", name+".tar"))
	}
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: filepath.Join(dir, "cluster"),
		RealNode: true, Images: archives, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	t.Logf("%6.1fs  cluster with a real node Ready, %d images imported (%s among them)", time.Since(began).Seconds(), len(archives), upstream.SandboxdImage)
	k := newKube(t, c.Config)
	installOnNode(t, ctx, k, r)
	upstreamInertController(t, ctx, k)
	t.Logf("%6.1fs  the release installed, the controller and the router running from their images", time.Since(began).Seconds())

	for _, l := range upstream.RealNode {
		t.Run("upstream "+l.Test, func(t *testing.T) {
			runUpstreamOnNode(t, bins, c.Kubeconfig, out, l)
		})
	}

	k.apply(t, ctx, "sandboxd template and warm pool", gitopsManager, sandboxdPool(t))
	testenv.Eventually(t, 3*time.Minute, "warm pool "+sdkPool+" full", func() error { return poolFullIn(ctx, k, sdkNamespace, sdkPool) })
	t.Logf("%6.1fs  warm pool %s/%s of sandboxd full", time.Since(began).Seconds(), sdkNamespace, sdkPool)

	var steps []sdkStep
	t.Run("upstream's Go SDK", func(t *testing.T) {
		steps = append(steps, runGoSDK(t, c.Kubeconfig)...)
	})
	t.Run("upstream's Python SDK, K8sHelper", func(t *testing.T) {
		steps = append(steps, runPythonSDK(t, c.Kubeconfig)...)
	})
	t.Logf("the SDKs' steps on the real node:\n%s", formatSteps(steps))
}

// upstreamInertController is what upstream's framework checks before every test: the
// Deployment agent-sandbox-controller in agent-sandbox-system (router.yaml made the namespace),
// available. Its Pod runs busybox's sleep, not upstream's controller: the controller under test
// is this repository's, from install.yaml.
func upstreamInertController(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	labels := map[string]string{"app": upstreamControllerName}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamControllerName, Namespace: upstreamSystemNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: upstreamControllerName, Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"sleep", "2147483647"},
				}}},
			},
		},
	}
	if _, err := k.cs.AppsV1().Deployments(upstreamSystemNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "Deployment agent-sandbox-controller available", func() error {
		return k.deploymentAvailable(ctx, upstreamSystemNamespace, upstreamControllerName)
	})
}

// runUpstreamOnNode runs one of upstream's tests alone, to its end, with kubectl from PATH
// (its framework's port-forward), and fails unless it and all its subtests pass.
func runUpstreamOnNode(t *testing.T, bins, kubeconfig, out string, l upstream.Listed) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		testenv.Missing(t, "kubectl not on PATH (%v): upstream's framework runs `kubectl port-forward`", err)
	}
	var pkg upstream.Package
	for _, p := range upstream.Packages {
		if p.Name == l.Package {
			pkg = p
		}
	}
	run := upstreamBinary{
		binary: filepath.Join(bins, pkg.Binary), pkg: pkg.Name,
		env: upstream.Environ(os.Environ(), pkg, kubeconfig, filepath.Join(out, "node-artifacts")),
		dir: filepath.Join(out, "node-work", pkg.Name),
	}
	start := time.Now()
	got, err := run.run(t, filepath.Join(out, "node-events", pkg.Name+"."+l.Test+".json"), []string{"-test.run=" + upstream.RunPattern(l.Test)}, "")
	if err != nil {
		t.Fatal(err)
	}
	passed := false
	for _, o := range got {
		if o.Result != upstream.Pass {
			t.Errorf("%s %s: %q after %.1fs:\n%s", o.Package, o.Test, o.Result, o.Seconds, strings.Join(o.Output, "\n"))
		}
		passed = passed || (o.Test == l.Test && o.Result == upstream.Pass)
	}
	if !passed {
		t.Fatalf("%s %s did not pass (events: %s)", pkg.Name, l.Test, filepath.Join(out, "node-events"))
	}
	t.Logf("%s %s: PASS in %v (%s)", pkg.Name, l.Test, time.Since(start).Round(100*time.Millisecond), l.Reason)
}

// sandboxdPool is upstream's sandboxd SandboxTemplate (examples/sandboxd-sandbox/
// sandbox-template.yaml) with the image the node has, and a warm pool of two on it, in the SDKs'
// default namespace: one member for each SDK, the second claimed while the pool refills.
func sandboxdPool(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: sandboxd-template, namespace: %[1]s}
spec:
  podTemplate:
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, fsGroup: %[3]d}
      containers:
      - name: sandboxd
        image: %[2]s
        imagePullPolicy: IfNotPresent
        securityContext:
          runAsUser: %[3]d
          runAsGroup: %[3]d
          runAsNonRoot: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
        resources:
          requests: {cpu: 100m, memory: 128Mi}
          limits: {cpu: 500m, memory: 512Mi}
        ports: [{containerPort: 8080}, {containerPort: 9090}]
        readinessProbe:
          httpGet: {path: /v1/health, port: 8080}
        volumeMounts: [{name: workspace, mountPath: /workspace}]
      volumes: [{name: workspace, emptyDir: {}}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: %[4]s, namespace: %[1]s}
spec:
  replicas: 2
  sandboxTemplateRef: {name: sandboxd-template}
`, sdkNamespace, upstream.SandboxdImage, upstream.SandboxdUID, sdkPool)
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}

// sdkStep is one step of an SDK's run and how long it took.
type sdkStep struct{ sdk, step, took string }

// runGoSDK runs hack/tools/agent-sandbox-sdk's test (its module, compiled here with its own
// go.sum) against the cluster, with only KUBECONFIG and the pool's name.
func runGoSDK(t *testing.T, kubeconfig string) []sdkStep {
	cmd := exec.Command("go", "test", "-count=1", "-v", "-timeout=10m", "-run=^TestGoSDKSandboxd$", ".")
	cmd.Dir = filepath.Join(testenv.RepoRoot(), sdkModule)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "SANDBOX_SDK_WARMPOOL="+sdkPool)
	return runSDK(t, "Go", cmd)
}

// runPythonSDK runs hack/tools/agent-sandbox-sdk/k8shelper.py with python3 from PATH and the
// Python SDK from the module cache's agent-sandbox, the version the Go module requires.
func runPythonSDK(t *testing.T, kubeconfig string) []sdkStep {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3 not on PATH: %v", err)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/agent-sandbox")
	list.Dir = filepath.Join(testenv.RepoRoot(), sdkModule)
	dir, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/agent-sandbox in %s: %v", sdkModule, err)
	}
	sdk := filepath.Join(strings.TrimSpace(string(dir)), pythonSDK)
	script := filepath.Join(testenv.RepoRoot(), sdkModule, "k8shelper.py")
	cmd := exec.Command(python, "-B", script, sdk, sdkPool)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return runSDK(t, "Python", cmd)
}

// runSDK runs cmd, logs its output, takes the steps it reports, and fails when it fails.
func runSDK(t *testing.T, sdk string, cmd *exec.Cmd) []sdkStep {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := testenv.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	var steps []sdkStep
	var output []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		output = append(output, line)
		if rest, ok := strings.CutPrefix(line, stepPrefix); ok {
			if step, took, ok := strings.Cut(rest, "\t"); ok {
				steps = append(steps, sdkStep{sdk: sdk, step: step, took: took})
			}
		}
	}
	err = cmd.Wait()
	t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), strings.Join(output, "\n"))
	if err != nil {
		t.Fatalf("the %s SDK's run failed: %v", sdk, err)
	}
	if len(steps) == 0 {
		t.Fatalf("the %s SDK's run reported no step", sdk)
	}
	return steps
}

func formatSteps(steps []sdkStep) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SDK\tSTEP\tLATENCY")
	for _, s := range steps {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.sdk, s.step, s.took)
	}
	_ = w.Flush()
	return b.String()
}
