package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testimage"
)

// realNodeEnv turns TestInstallRealNode on: it needs root and the real node's tools, and only
// one real node runs on a machine at a time, so only `make e2e-node` runs it.
const realNodeEnv = "SANDBOX_REAL_NODE"

// testImage is testkit/testimage's server, built and imported into the node by the test.
const testImage = "sandbox-gitops.local/sandbox-testserver:e2e"

// sandboxPort is the port the example's template serves on, the router's default.
const sandboxPort = "8888"

// TestInstallRealNode is `make e2e-node`: the body of TestInstall on a cluster with a real node,
// where everything runs from its image: the controller as install.yaml's Deployment (two
// replicas, leader election, the webhook reached through its Service by kube-proxy), the router
// as router.yaml's, and docs/example's sandboxes as real Pods of the test image. On top of the
// body it sends traffic through the router's Service to the sandboxes (HTTP, WebSocket, SSE, an
// unknown id), takes a sandbox with a volume through suspend, resume and expiry, and rolls a
// template image change out under each updateStrategy (then one to an image that never starts).
func TestInstallRealNode(t *testing.T) {
	if os.Getenv(realNodeEnv) != "1" {
		t.Skipf("e2e-node: skipped: %s is not 1; `make e2e-node` runs this test", realNodeEnv)
	}
	r := readRelease(t)
	dir := t.TempDir()
	began := time.Now()
	server, archives := buildTestImage(t, r, dir)
	v2 := filepath.Join(dir, "sandbox-testserver-v2.tar")
	if err := cluster.BuildImage(cluster.NodeImage{Ref: testImageV2, Binary: server}, v2); err != nil {
		t.Fatal(err)
	}
	archives = append(archives, v2)
	ctx := context.Background()
	c := startRealNodeCluster(t, filepath.Join(dir, "cluster"), archives)
	t.Logf("%6.1fs  cluster with a real node Ready, %d images imported", time.Since(began).Seconds(), len(archives))
	env := realNode{release: r}
	testInstall(t, ctx, c.Config, r, env)
	k := newKube(t, c.Config)
	t.Run("the render image as Argo CD's sidecar runs it", func(t *testing.T) { checkRenderImage(t, ctx, k, r) })
	t.Run("helm install, upgrade with a changed CRD, uninstall, install again", func(t *testing.T) { checkHelm(t, ctx, c, k, r) })
}

// startRealNodeCluster starts a cluster with the real node in dir, the image tarballs imported,
// and stops it when the test ends.
func startRealNodeCluster(t *testing.T, dir string, archives []string) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: testenv.BinDir(), Dir: dir, RealNode: true, Images: archives, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}

// realNode is inCluster on a node whose Pods really run: the example's sandboxes run the test
// image, and the running sandboxes are reached through the router.
type realNode struct {
	inCluster
	release *release
}

// example points docs/example's template at the test image, as an overlay would: the same
// container, port and command line, served by the test server.
func (realNode) example(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "SandboxTemplate" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "podTemplate", "spec", "containers")
		if len(containers) == 0 {
			t.Fatalf("SandboxTemplate %s has no container", o.GetName())
		}
		c := containers[0].(map[string]any)
		c["image"] = testImage
		c["imagePullPolicy"] = "Never"
		delete(c, "command")
		c["env"] = testServerEnv()
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "podTemplate", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
}

// testServerEnv is the test server's environment in a sandbox: the template's port, its Pod's
// name and namespace, and a data directory that a volume may mount.
func testServerEnv() []any {
	field := func(name, path string) map[string]any {
		return map[string]any{"name": name, "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": path}}}
	}
	return []any{
		map[string]any{"name": "PORT", "value": sandboxPort},
		map[string]any{"name": "DATA_DIR", "value": "/data"},
		field("POD_NAME", "metadata.name"),
		field("POD_NAMESPACE", "metadata.namespace"),
	}
}

// converged runs once docs/example has converged: traffic through the router, then a sandbox
// with a volume.
func (n realNode) converged(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	base := routerURL(t, ctx, k)
	claim := &extv1beta1.SandboxClaim{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: "alice"}, claim); err != nil {
		t.Fatal(err)
	}
	sb := claim.Status.SandboxStatus.Name
	if sb == "" {
		t.Fatalf("claim alice is Ready with no Sandbox in its status")
	}
	t.Run("router to a sandbox", func(t *testing.T) { checkRouterTraffic(t, ctx, k, base, sb) })
	t.Run("a sandbox's volume across suspend, resume and expiry", func(t *testing.T) { checkVolumeLifecycle(t, ctx, k, base) })
	t.Run("a claimed Sandbox's Pod deleted: Ready=False before the new Pod is Ready", func(t *testing.T) {
		checkPodLossVisible(t, ctx, k, "bob")
	})
	t.Run("the router's --authz=kubernetes: 403 without RBAC, through with it", func(t *testing.T) {
		checkRouterAuthz(t, ctx, k, n.release, base, sb)
	})
	t.Run("a template's image changed under each updateStrategy; an image that never starts", func(t *testing.T) {
		checkRollouts(t, ctx, k)
	})
}

// routerURL is the router's Service as the host reaches it: its cluster IP, which the host
// routes to the node, where kube-proxy sends it on to the router's Pod.
func routerURL(t *testing.T, ctx context.Context, k *kube) string {
	t.Helper()
	svc, err := k.cs.CoreV1().Services(routerNamespace).Get(ctx, "sandbox-router-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "8080")
}

// sandboxHeader addresses a Sandbox of the example's namespace through the router.
func sandboxHeader(name string) http.Header {
	return http.Header{"X-Sandbox-Id": {name}, "X-Sandbox-Namespace": {exampleNamespace}}
}

// routerDo sends one request through the router to a Sandbox and returns the status and body.
func routerDo(ctx context.Context, method, url, sandbox string, body io.Reader) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header = sandboxHeader(sandbox)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func checkRouterTraffic(t *testing.T, ctx context.Context, k *kube, base, sb string) {
	sandbox := &agentsv1beta1.Sandbox{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: sb}, sandbox); err != nil {
		t.Fatal(err)
	}
	wantPod := sb
	if p := sandbox.Annotations["agents.x-k8s.io/pod-name"]; p != "" {
		wantPod = p
	}

	t.Run("HTTP reaches the sandbox's container", func(t *testing.T) {
		code, body, err := routerDo(ctx, http.MethodGet, base+"/hello", sb, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Pod, Namespace, Path string }
		if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
			t.Fatalf("GET /hello through the router: %d %s (%v)", code, body, err)
		}
		want := struct{ Pod, Namespace, Path string }{wantPod, exampleNamespace, "/hello"}
		if got != want {
			t.Fatalf("the answer came from %+v, want %+v", got, want)
		}
	})

	t.Run("WebSocket round trip", func(t *testing.T) {
		wsCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, resp, err := testimage.DialWebSocket(wsCtx, base+"/ws", sandboxHeader(sb))
		if err != nil {
			t.Fatalf("WebSocket through the router: %v (response %v)", err, resp)
		}
		defer conn.Close()
		for _, msg := range []string{"hello", strings.Repeat("x", 70_000)} {
			if err := conn.WriteText(msg); err != nil {
				t.Fatal(err)
			}
			got, err := conn.ReadText()
			if err != nil {
				t.Fatal(err)
			}
			if got != msg {
				t.Fatalf("echo of a %d-byte message came back as %d bytes", len(msg), len(got))
			}
		}
	})

	t.Run("SSE arrives as the container writes it", func(t *testing.T) {
		sseCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		const n, interval = 4, 500 * time.Millisecond
		req, err := http.NewRequestWithContext(sseCtx, http.MethodGet, fmt.Sprintf("%s/sse?n=%d&interval=%s", base, n, interval), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = sandboxHeader(sb)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var arrivals []time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				arrivals = append(arrivals, time.Since(start))
			}
		}
		if len(arrivals) != n {
			t.Fatalf("%d events arrived, want %d (%v)", len(arrivals), n, sc.Err())
		}
		// Buffered, every event would arrive together at the end, (n-1) intervals in.
		if arrivals[0] > time.Duration(n-2)*interval {
			t.Fatalf("the first event arrived after %v, the whole stream takes %v: the router buffered it (arrivals %v)",
				arrivals[0], time.Duration(n-1)*interval, arrivals)
		}
	})

	t.Run("an unknown sandbox is a 404", func(t *testing.T) {
		code, body, err := routerDo(ctx, http.MethodGet, base+"/", "no-such-sandbox", nil)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusNotFound {
			t.Fatalf("an unknown X-Sandbox-ID answered %d %s, want 404", code, body)
		}
	})
}

// volumeSandbox is a Sandbox of the test image with a volume from volumeClaimTemplates at /data.
func volumeSandbox(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	env, err := json.Marshal(testServerEnv())
	if err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: %s, namespace: %s}
spec:
  podTemplate:
    spec:
      containers:
      - name: server
        image: %s
        imagePullPolicy: Never
        env: %s
        ports: [{containerPort: %s}]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 10Mi}}
`, name, exampleNamespace, testImage, env, sandboxPort)
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkVolumeLifecycle: the provisioner binds the Sandbox's PVC and the container writes a file;
// Suspended deletes the Pod and keeps the PVC; Running again brings up a Pod that reads the same
// file; shutdownTime with shutdownPolicy Delete removes it all.
func checkVolumeLifecycle(t *testing.T, ctx context.Context, k *kube, base string) {
	const name = "with-volume"
	sb := volumeSandbox(t, name)
	k.apply(t, ctx, "a Sandbox with a volume", gitopsManager, []*unstructured.Unstructured{sb})
	ready := func() error { return sandboxReady(ctx, k, name) }
	testenv.Eventually(t, 2*time.Minute, "Sandbox "+name+" Ready", ready)
	pvcs := func() ([]string, error) {
		list, err := k.cs.CoreV1().PersistentVolumeClaims(exampleNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var bound []string
		for _, p := range list.Items {
			if strings.Contains(p.Name, name) && p.Status.Phase == corev1.ClaimBound {
				bound = append(bound, p.Name)
			}
		}
		return bound, nil
	}
	bound, err := pvcs()
	if err != nil || len(bound) != 1 {
		t.Fatalf("bound PVCs of %s: %v (%v), want one", name, bound, err)
	}
	const content = "written before the suspend"
	testenv.Eventually(t, timeout, "the file written through the router", func() error {
		code, body, err := routerDo(ctx, http.MethodPut, base+"/files/note", name, strings.NewReader(content))
		if err != nil {
			return err
		}
		if code/100 != 2 {
			return fmt.Errorf("PUT /files/note: %d %s", code, body)
		}
		return nil
	})

	setMode := func(mode string) {
		patch := fmt.Sprintf(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":%q,"namespace":%q},"spec":{"operatingMode":%q}}`,
			name, exampleNamespace, mode)
		o := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(patch), &o.Object); err != nil {
			t.Fatal(err)
		}
		k.apply(t, ctx, "operatingMode "+mode, gitopsManager+"-mode", []*unstructured.Unstructured{o})
	}
	setMode("Suspended")
	testenv.Eventually(t, timeout, "the suspended Sandbox's Pod deleted", func() error {
		pods, err := sandboxPods(ctx, k, name)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("Pods %v still exist", pods)
		}
		return nil
	})
	if kept, err := pvcs(); err != nil || !slices.Equal(kept, bound) {
		t.Fatalf("after the suspend the bound PVCs are %v (%v), want %v kept", kept, err, bound)
	}

	setMode("Running")
	testenv.Eventually(t, 2*time.Minute, "Sandbox "+name+" Ready again", ready)
	testenv.Eventually(t, timeout, "the file read back by the new Pod", func() error {
		code, body, err := routerDo(ctx, http.MethodGet, base+"/files/note", name, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK || string(body) != content {
			return fmt.Errorf("GET /files/note: %d %q, want 200 %q", code, body, content)
		}
		return nil
	})

	expire := fmt.Sprintf(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":%q,"namespace":%q},"spec":{"shutdownTime":%q,"shutdownPolicy":"Delete"}}`,
		name, exampleNamespace, time.Now().Add(2*time.Second).UTC().Format(time.RFC3339))
	o := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(expire), &o.Object); err != nil {
		t.Fatal(err)
	}
	k.apply(t, ctx, "shutdownTime", gitopsManager+"-expiry", []*unstructured.Unstructured{o})
	testenv.Eventually(t, 2*time.Minute, "the expired Sandbox, its Pod and its PVC gone", func() error {
		var errs []error
		err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: name}, &agentsv1beta1.Sandbox{})
		if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("Sandbox %s still there (%v)", name, err))
		}
		if pods, err := sandboxPods(ctx, k, name); err != nil || len(pods) > 0 {
			errs = append(errs, fmt.Errorf("Pods %v (%v)", pods, err))
		}
		list, err := k.cs.CoreV1().PersistentVolumeClaims(exampleNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, p := range list.Items {
				if strings.Contains(p.Name, name) {
					errs = append(errs, fmt.Errorf("PVC %s still there", p.Name))
				}
			}
		}
		return errors.Join(errs...)
	})
}

// sandboxReady is nil once the Sandbox's Ready condition is True.
func sandboxReady(ctx context.Context, k *kube, name string) error {
	sb := &agentsv1beta1.Sandbox{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: name}, sb); err != nil {
		return err
	}
	if cond := meta.FindStatusCondition(sb.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
		return fmt.Errorf("Sandbox %s not Ready: %+v", name, cond)
	}
	return nil
}

// sandboxPods are the names of the Pods a Sandbox controls.
func sandboxPods(ctx context.Context, k *kube, name string) ([]string, error) {
	list, err := k.cs.CoreV1().Pods(exampleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "Sandbox" && ref.Name == name {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// checkPodLossVisible deletes the Pod of a claim's Sandbox and polls the Sandbox every 100 ms,
// as upstream's TestWarmPoolSandboxWatcher does: the loss (Ready=False) must show before the
// replacement Pod makes it Ready again. A deleted Pod took the agent's process and memory with it.
func checkPodLossVisible(t *testing.T, ctx context.Context, k *kube, claimName string) {
	claim := &extv1beta1.SandboxClaim{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: claimName}, claim); err != nil {
		t.Fatal(err)
	}
	sb := claim.Status.SandboxStatus.Name
	pods, err := sandboxPods(ctx, k, sb)
	if err != nil || len(pods) != 1 {
		t.Fatalf("Pods of Sandbox %s: %v (%v), want one", sb, pods, err)
	}
	old, err := k.cs.CoreV1().Pods(exampleNamespace).Get(ctx, pods[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	deleted := time.Now()
	if err := k.cs.CoreV1().Pods(exampleNamespace).Delete(ctx, pods[0], metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	var sawFalse time.Duration
	var reason string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got := &agentsv1beta1.Sandbox{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: sb}, got); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, "Ready")
		switch {
		case cond != nil && cond.Status == metav1.ConditionFalse && sawFalse == 0:
			sawFalse, reason = time.Since(deleted), cond.Reason+": "+cond.Message
		case cond != nil && cond.Status == metav1.ConditionTrue && sawFalse > 0:
			// The replacement has the same name (the Sandbox's); it is another Pod by its UID.
			cur, err := k.cs.CoreV1().Pods(exampleNamespace).Get(ctx, pods[0], metav1.GetOptions{})
			if err != nil || cur.UID == old.UID || !podReady(cur) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			t.Logf("Sandbox %s: Ready=False %v after its Pod was deleted (%s), Ready again %v after", sb, sawFalse.Round(time.Millisecond), reason, time.Since(deleted).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sawFalse == 0 {
		t.Fatalf("Sandbox %s never showed Ready=False within 60 s of its Pod's deletion", sb)
	}
	t.Fatalf("Sandbox %s showed Ready=False after %v (%s) but was not Ready with a new Pod within 60 s", sb, sawFalse, reason)
}
