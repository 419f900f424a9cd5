package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testimage"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// The dataplane's test hosts: addresses outside every range the cluster uses, in a network
// namespace the test makes behind the node (cluster.StartTestHost). 198.51.100.0/24 is
// TEST-NET-2, outside the default policy's excepted ranges; 169.254.169.0/24 is link-local, inside
// them.
const (
	outsideHost   = "198.51.100.10"
	linkLocalHost = "169.254.169.100"
	echoPort      = "9000"
)

// row is one connection attempt of the dataplane table.
type row struct {
	table, from, to, port string
	want                  bool // allowed
	got                   bool
	took                  time.Duration
	detail                string
	attempts              int
	note                  string
}

// converged bounds how long a row is tried before its answer counts: kube-router's firewall
// takes a policy or a new Pod into its rules a few seconds after the watch event.
const converged = 30 * time.Second

// TestDataplane proves the NetworkPolicies the controller renders on a real dataplane
// (kube-router's firewall on the real node), connection by connection, from inside real Pods:
// the secure default, the DNS modes, custom rules, Unmanaged, and a Pod range in 100.64.0.0/10.
// Every table has a control: the same connections with the policies deleted (the controller
// stopped so that it does not put them back) must go through, so a dataplane that enforced
// nothing would fail it.
func TestDataplane(t *testing.T) {
	if os.Getenv(realNodeEnv) != "1" {
		t.Skipf("e2e-node: skipped: %s is not 1; `make e2e-node` runs this test", realNodeEnv)
	}
	r := readRelease(t)
	dir := t.TempDir()
	server, archives := buildTestImage(t, r, dir)
	var rows []row
	t.Cleanup(func() { t.Logf("the dataplane table:\n%s", formatRows(rows)) })

	t.Run("Pod range 10.244.0.0/16", func(t *testing.T) {
		k, stop := dataplaneCluster(t, r, filepath.Join(dir, "default"), server, archives, "")
		defer stop()
		rows = append(rows, defaultTables(t, k)...)
	})
	t.Run("Pod range 100.64.0.0/16 (CGNAT)", func(t *testing.T) {
		k, stop := dataplaneCluster(t, r, filepath.Join(dir, "cgnat"), server, archives, "100.64.0.0/16")
		defer stop()
		rows = append(rows, cgnatTables(t, k)...)
	})
}

// buildTestImage builds the test server and its image, and lists the images the cluster imports.
func buildTestImage(t *testing.T, r *release, dir string) (string, []string) {
	t.Helper()
	server := filepath.Join(dir, "sandbox-testserver")
	build := exec.Command("go", "build", "-trimpath", "-o", server, "./testkit/testimage/sandbox-testserver")
	build.Dir = testenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test image's server: %v: %s", err, out)
	}
	tarball := filepath.Join(dir, "sandbox-testserver.tar")
	if err := cluster.BuildImage(cluster.NodeImage{Ref: testImage, Binary: server}, tarball); err != nil {
		t.Fatal(err)
	}
	archives := []string{tarball}
	for _, name := range images {
		archives = append(archives, filepath.Join(r.dir, "images", name+".tar"))
	}
	return server, archives
}

// dataplaneCluster starts a cluster with the real node and the test host, installs the release
// and the router, and applies the dataplane's namespaces.
func dataplaneCluster(t *testing.T, r *release, dir, server string, archives []string, podCIDR string) (*kube, func()) {
	t.Helper()
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: testenv.BinDir(), Dir: dir, RealNode: true, Images: archives,
		PodCIDR: podCIDR, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	host, err := c.StartTestHost(ctx, "th-outside", []string{outsideHost + "/24", linkLocalHost + "/24"},
		[]string{"TCP_ECHO_PORT=" + echoPort, "UDP_ECHO_PORT=0", "PORT=8080", "POD_NAME=test-host"}, server)
	if err != nil {
		_ = c.Stop()
		t.Fatal(err)
	}
	stop := func() {
		if err := errors.Join(host.Stop(), c.Stop()); err != nil {
			t.Errorf("stopping: %v", err)
		}
	}
	k := newKube(t, c.Config)
	installOnNode(t, ctx, k, r)
	return k, stop
}

// installOnNode applies install.yaml and router.yaml as a user does and returns once the
// controller and the router run from their images and the webhook's CA is in every CRD.
func installOnNode(t *testing.T, ctx context.Context, k *kube, r *release) {
	t.Helper()
	k.apply(t, ctx, "install.yaml", installManager, r.install)
	testenv.Eventually(t, timeout, "every CRD established", func() error { return crdsEstablished(ctx, k, r.install) })
	applyRouter(t, ctx, k, r)
	for _, d := range [][2]string{{webhook.DefaultNamespace, controllerName}, {routerNamespace, routerName}} {
		testenv.Eventually(t, 3*time.Minute, "Deployment "+d[1]+" available", func() error { return k.deploymentAvailable(ctx, d[0], d[1]) })
	}
	testenv.Eventually(t, timeout, "caBundle set", func() error { return caBundlesSet(ctx, k, r.install) })
}

// dataplaneObjects are the namespaces of the tables: a plain Pod and its Service in dp-other, a
// plain Pod beside the sandboxes in dp-default, and templates with warm pools (one Pod each,
// two for a) under each configuration.
func dataplaneObjects(t *testing.T, cgnat bool) []*unstructured.Unstructured {
	t.Helper()
	env := testServerEnv()
	container := map[string]any{"name": "server", "image": testImage, "imagePullPolicy": "Never", "env": env,
		"ports": []any{map[string]any{"containerPort": 8888}}}
	plainPod := func(ns, name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": name}},
			"spec": map[string]any{"containers": []any{container}, "terminationGracePeriodSeconds": 0}}
	}
	template := func(ns, name string, extra map[string]any) []map[string]any {
		spec := map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{container}}}}
		for k, v := range extra {
			spec[k] = v
		}
		replicas := 1
		if name == "a" || name == "x" {
			replicas = 2
		}
		return []map[string]any{
			{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate", "metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec},
			{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool", "metadata": map[string]any{"name": name, "namespace": ns},
				"spec": map[string]any{"replicas": replicas, "sandboxTemplateRef": map[string]any{"name": name}}},
		}
	}
	config := func(ns string, networkPolicy map[string]any) map[string]any {
		return map[string]any{"apiVersion": "render.sandbox-gitops.dev/v1alpha1", "kind": "SandboxRender", "metadata": map[string]any{"name": "render", "namespace": ns},
			"spec": map[string]any{"policies": map[string]any{"networkPolicy": networkPolicy}}}
	}
	var objs []map[string]any
	namespaces := []string{"dp-other", "dp-default"}
	objs = append(objs, plainPod("dp-other", "other"), plainPod("dp-default", "client"),
		map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "other", "namespace": "dp-other"},
			"spec": map[string]any{"selector": map[string]any{"app": "other"}, "ports": []any{map[string]any{"port": 9000, "targetPort": 9000}}}})
	objs = append(objs, template("dp-default", "a", nil)...)
	if cgnat {
		namespaces = append(namespaces, "dp-cgnat")
		objs = append(objs, config("dp-cgnat", map[string]any{"extraEgressExceptions": []any{"100.64.0.0/10"}}))
		objs = append(objs, template("dp-cgnat", "x", nil)...)
	} else {
		namespaces = append(namespaces, "dp-dns", "dp-custom", "dp-unmanaged")
		objs = append(objs, template("dp-default", "b", nil)...)
		objs = append(objs, config("dp-dns", map[string]any{"dns": "cluster-dns"}))
		objs = append(objs, template("dp-dns", "c", nil)...)
		objs = append(objs, template("dp-custom", "e", map[string]any{"networkPolicy": map[string]any{"egress": []any{map[string]any{
			"to":    []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "dp-other"}}}},
			"ports": []any{map[string]any{"port": 9000, "protocol": "TCP"}}}}}})...)
		objs = append(objs, template("dp-custom", "z", map[string]any{"networkPolicy": map[string]any{}})...)
		objs = append(objs, template("dp-unmanaged", "u", map[string]any{"networkPolicyManagement": "Unmanaged"})...)
	}
	var out []*unstructured.Unstructured
	for _, ns := range namespaces {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}})
	}
	for _, o := range objs {
		// Through YAML, so numbers are what the API server's decoder makes of them.
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// pods are the running Pods the tables name: "other", "client", and each pool's members as
// <pool>-0, <pool>-1, ... (in name order), with their namespaces and IPs.
type pods map[string]*corev1.Pod

func readPods(ctx context.Context, k *kube, namespaces []string, poolSizes map[string]int) (pods, error) {
	out := pods{}
	for _, ns := range namespaces {
		list, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		byPool := map[string][]*corev1.Pod{}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podReady(p) {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Sandbox" {
				pool := poolOf(ctx, k, ns, ref.Name)
				byPool[pool] = append(byPool[pool], p)
				continue
			}
			out[p.Name] = p
		}
		for pool, members := range byPool {
			slices.SortFunc(members, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
			for i, p := range members {
				out[fmt.Sprintf("%s-%d", pool, i)] = p
			}
		}
	}
	var missing []string
	for pool, n := range poolSizes {
		for i := range n {
			if out[fmt.Sprintf("%s-%d", pool, i)] == nil {
				missing = append(missing, fmt.Sprintf("%s-%d", pool, i))
			}
		}
	}
	for _, name := range []string{"other", "client"} {
		if out[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("not running and Ready yet: %v", missing)
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poolOf is the warm pool a Sandbox was made for, by its owner.
func poolOf(ctx context.Context, k *kube, ns, sandbox string) string {
	sb := &agentsv1beta1.Sandbox{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox}, sb); err != nil {
		return "?"
	}
	for _, ref := range sb.GetOwnerReferences() {
		if ref.Kind == "SandboxWarmPool" {
			return ref.Name
		}
	}
	return "?"
}

// probe is one row's attempt: from a Pod (by port-forward to its test server) or from the router
// (through its Service), to an address.
type probe struct {
	from, to string // names in pods, "router", or a test host's address
	proto    string // tcp (an echo answered), http (the router reaching a sandbox), dns (a query answered)
	port     string
	note     string // why the expectation is what it is, where that is not plain
}

func (p probe) run(ctx context.Context, k *kube, base string, ps pods) (bool, string, error) {
	if p.from == "router" {
		sb := ps[p.to]
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
		if err != nil {
			return false, "", err
		}
		req.Header = http.Header{"X-Sandbox-Id": {sandboxName(sb)}, "X-Sandbox-Namespace": {sb.Namespace}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, "", err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	}
	src := ps[p.from]
	addr := p.to
	if target, ok := ps[p.to]; ok {
		addr = target.Status.PodIP
	}
	switch p.proto {
	case "dns":
		var res testimage.DNSResult
		q := url.Values{"name": {"kubernetes.default.svc.cluster.local"}, "server": {net.JoinHostPort(addr, p.port)}, "timeout": {"2s"}}
		if err := inPod(ctx, k, src.Namespace, src.Name, "/dns", q, &res); err != nil {
			return false, "", err
		}
		return res.OK, res.Error, nil
	default:
		var res testimage.DialResult
		q := url.Values{"proto": {"tcp"}, "addr": {net.JoinHostPort(addr, p.port)}, "timeout": {"2s"}}
		if p.port == echoPort {
			q.Set("send", "ping\n")
		}
		if err := inPod(ctx, k, src.Namespace, src.Name, "/dial", q, &res); err != nil {
			return false, "", err
		}
		return res.OK, res.Error, nil
	}
}

// sandboxName is the Sandbox a Pod belongs to.
func sandboxName(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Name
	}
	return p.Name
}

// runTable runs each probe and records it; want says which are allowed.
func runTable(t *testing.T, ctx context.Context, k *kube, table string, ps pods, probes []probe, want map[int]bool) []row {
	t.Helper()
	base := routerURL(t, ctx, k)
	var out []row
	for i, p := range probes {
		// kube-router applies a Pod's or a policy's change some time after its watch event, so a
		// row is tried until it gives what it should or converged stops it: the table is the
		// dataplane's steady state, and attempts says how long it took to get there.
		start := time.Now()
		var got bool
		var detail string
		attempts := 0
		for {
			attempts++
			var err error
			got, detail, err = p.run(ctx, k, base, ps)
			if err != nil {
				t.Fatalf("%s: %s -> %s: %v", table, p.from, p.to, err)
			}
			if got == want[i] || time.Since(start) > converged {
				break
			}
			time.Sleep(time.Second)
		}
		if attempts > 1 {
			detail = fmt.Sprintf("%s (after %d attempts)", detail, attempts)
			t.Logf("%s: %s -> %s took %d attempts, %v, to read %s", table, p.from, p.to, attempts, time.Since(start).Round(time.Millisecond), verdict(got))
		}
		to := p.to
		if pod, ok := ps[p.to]; ok {
			to = fmt.Sprintf("%s (%s/%s)", p.to, pod.Namespace, pod.Status.PodIP)
		}
		r := row{table: table, from: p.from, to: to, port: p.proto + "/" + p.port, want: want[i], got: got, took: time.Since(start), detail: detail, attempts: attempts, note: p.note}
		out = append(out, r)
		if r.got != r.want {
			t.Errorf("%s: %s -> %s %s: %s, want %s (%s)", table, r.from, r.to, r.port, verdict(r.got), verdict(r.want), detail)
		}
	}
	return out
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "refused"
}

func formatRows(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| table | from | to | port | expected | got | time | attempts | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d ms | %d | %s |\n", r.table, r.from, r.to, r.port, verdict(r.want), verdict(r.got), r.took.Milliseconds(), r.attempts, r.note)
	}
	return b.String()
}

// withoutPolicies stops the controller, deletes every NetworkPolicy of namespaces, runs f, and
// starts the controller again, which puts the policies back.
func withoutPolicies(t *testing.T, ctx context.Context, k *kube, namespaces []string, f func()) {
	t.Helper()
	ns := webhook.DefaultNamespace
	scale := func(n int32) {
		s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: controllerName, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		if _, err := k.cs.AppsV1().Deployments(ns).UpdateScale(ctx, controllerName, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	testenv.Eventually(t, timeout, "the controller's Pods gone", func() error {
		list, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
	for _, n := range namespaces {
		if err := k.cs.NetworkingV1().NetworkPolicies(n).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// kube-router applies a change within a second or two of the watch event.
	time.Sleep(3 * time.Second)
	f()
	scale(2)
	testenv.Eventually(t, 3*time.Minute, "the controller back", func() error { return k.deploymentAvailable(ctx, ns, controllerName) })
}

func defaultTables(t *testing.T, k *kube) []row {
	ctx := context.Background()
	k.apply(t, ctx, "the dataplane's namespaces", gitopsManager, dataplaneObjects(t, false))
	namespaces := []string{"dp-other", "dp-default", "dp-dns", "dp-custom", "dp-unmanaged"}
	var ps pods
	testenv.Eventually(t, 3*time.Minute, "every Pod of the dataplane Running and Ready", func() (err error) {
		ps, err = readPods(ctx, k, namespaces, map[string]int{"a": 2, "b": 1, "c": 1, "e": 1, "z": 1, "u": 1})
		return err
	})
	policiesIn(t, ctx, k, "dp-default", "dp-dns", "dp-custom")

	var rows []row
	secure := []probe{
		{from: "router", to: "a-0", proto: "http", port: "8888"},
		{from: "client", to: "a-0", proto: "tcp", port: echoPort},
		{from: "other", to: "a-0", proto: "tcp", port: echoPort},
		{from: "a-0", to: "a-1", proto: "tcp", port: echoPort},
		{from: "a-0", to: "b-0", proto: "tcp", port: echoPort},
		{from: "a-0", to: "other", proto: "tcp", port: echoPort},
		{from: "a-0", to: "10.96.0.0", proto: "tcp", port: echoPort}, // the Service, replaced below
		{from: "a-0", to: "10.96.0.10", proto: "dns", port: "53"},
		{from: "a-0", to: linkLocalHost, proto: "tcp", port: echoPort},
		{from: "a-0", to: outsideHost, proto: "tcp", port: echoPort},
	}
	svc, err := k.cs.CoreV1().Services("dp-other").Get(ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secure[6].to = svc.Spec.ClusterIP
	rows = append(rows, runTable(t, ctx, k, "default Managed", ps, secure, map[int]bool{0: true, 9: true})...)

	var resolv string
	if err := inPod(ctx, k, ps["a-0"].Namespace, ps["a-0"].Name, "/resolv.conf", nil, &resolv); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"8.8.8.8", "1.1.1.1"} {
		if !strings.Contains(resolv, "nameserver "+ns) {
			t.Errorf("public-resolvers: the sandbox's resolv.conf has no nameserver %s:\n%s", ns, resolv)
		}
	}

	dnsRows := []probe{
		{from: "c-0", to: "10.96.0.10", proto: "dns", port: "53"},
		{from: "c-0", to: "other", proto: "tcp", port: echoPort},
		{from: "c-0", to: "a-0", proto: "tcp", port: echoPort},
		{from: "router", to: "c-0", proto: "http", port: "8888"},
	}
	rows = append(rows, runTable(t, ctx, k, "dns: cluster-dns", ps, dnsRows, map[int]bool{0: true, 3: true})...)
	var res testimage.DNSResult
	if err := inPod(ctx, k, ps["c-0"].Namespace, ps["c-0"].Name, "/dns", url.Values{"name": {"other.dp-other.svc.cluster.local"}, "timeout": {"3s"}}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK || !slices.Contains(res.Addrs, svc.Spec.ClusterIP) {
		t.Errorf("cluster-dns: the sandbox's own resolver gave %+v for other.dp-other.svc.cluster.local, want %s", res, svc.Spec.ClusterIP)
	}

	custom := []probe{
		{from: "e-0", to: "other", proto: "tcp", port: echoPort},
		{from: "e-0", to: "other", proto: "tcp", port: "8888"},
		{from: "e-0", to: "10.96.0.10", proto: "dns", port: "53", note: "render warns " + render.ReasonNetworkPolicyAllowsNoDNS + " (spec.networkPolicy.egress)"},
		{from: "e-0", to: outsideHost, proto: "tcp", port: echoPort},
		{from: "router", to: "e-0", proto: "http", port: "8888", note: "render warns " + render.ReasonNetworkPolicyAdmitsNoRouter + " (spec.networkPolicy.ingress)"},
		{from: "router", to: "z-0", proto: "http", port: "8888", note: "render warns " + render.ReasonNetworkPolicyDeniesAll + " (spec.networkPolicy)"},
		{from: "z-0", to: "other", proto: "tcp", port: echoPort},
		{from: "z-0", to: outsideHost, proto: "tcp", port: echoPort},
	}
	rows = append(rows, runTable(t, ctx, k, "custom rules", ps, custom, map[int]bool{0: true})...)
	checkWarnings(t, ctx, k, map[string][]string{
		"e": {render.ReasonNetworkPolicyAdmitsNoRouter, render.ReasonNetworkPolicyAllowsNoDNS},
		"z": {render.ReasonNetworkPolicyDeniesAll},
	})

	unmanaged := []probe{
		{from: "u-0", to: "other", proto: "tcp", port: echoPort},
		{from: "client", to: "u-0", proto: "tcp", port: echoPort},
		{from: "router", to: "u-0", proto: "http", port: "8888"},
	}
	rows = append(rows, runTable(t, ctx, k, "Unmanaged", ps, unmanaged, map[int]bool{0: true, 1: true, 2: true})...)

	withoutPolicies(t, ctx, k, []string{"dp-default", "dp-dns", "dp-custom"}, func() {
		all := map[int]bool{}
		for i := range 10 {
			all[i] = true
		}
		rows = append(rows, runTable(t, ctx, k, "control: default, policies deleted", ps, secure, all)...)
		rows = append(rows, runTable(t, ctx, k, "control: cluster-dns, policies deleted", ps, dnsRows[1:3], all)...)
		rows = append(rows, runTable(t, ctx, k, "control: custom, policies deleted", ps, custom[4:], all)...)
	})
	return rows
}

func cgnatTables(t *testing.T, k *kube) []row {
	ctx := context.Background()
	k.apply(t, ctx, "the dataplane's namespaces", gitopsManager, dataplaneObjects(t, true))
	namespaces := []string{"dp-other", "dp-default", "dp-cgnat"}
	var ps pods
	testenv.Eventually(t, 3*time.Minute, "every Pod of the dataplane Running and Ready", func() (err error) {
		ps, err = readPods(ctx, k, namespaces, map[string]int{"a": 2, "x": 2})
		return err
	})
	policiesIn(t, ctx, k, "dp-default", "dp-cgnat")
	if ip := ps["a-0"].Status.PodIP; !strings.HasPrefix(ip, "100.64.") {
		t.Fatalf("sandbox a-0 has IP %s, want one in 100.64.0.0/16", ip)
	}
	upstream := []probe{
		{from: "a-0", to: "other", proto: "tcp", port: echoPort},
		{from: "a-0", to: "client", proto: "tcp", port: echoPort},
		// By the NetworkPolicy API a-1's ingress (the router only) refuses a-0. kube-router v2.1.0
		// lets it in: it runs a policy's whole chain for the receiving Pod, and the same policy's
		// egress rule (0.0.0.0/0 less the private ranges, which 100.64.0.0/10 is not) matches the
		// packet from a-0, which that policy also selects. The row pins what this dataplane does;
		// extraEgressExceptions closes it below.
		{from: "a-0", to: "a-1", proto: "tcp", port: echoPort, note: "the API says refused; kube-router v2.1.0 lets a policy's own egress rule admit it"},
		{from: "a-0", to: outsideHost, proto: "tcp", port: echoPort},
		{from: "router", to: "a-0", proto: "http", port: "8888"},
	}
	// Upstream's default excepts only RFC 1918 and link-local ranges: in a CGNAT Pod range a
	// sandbox reaches every Pod that no policy of its own guards.
	var rows []row
	rows = append(rows, runTable(t, ctx, k, "CGNAT Pods, upstream's default", ps, upstream, map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true})...)
	closed := []probe{
		{from: "x-0", to: "other", proto: "tcp", port: echoPort},
		{from: "x-0", to: "client", proto: "tcp", port: echoPort},
		{from: "x-0", to: "x-1", proto: "tcp", port: echoPort},
		{from: "x-0", to: outsideHost, proto: "tcp", port: echoPort},
		{from: "router", to: "x-0", proto: "http", port: "8888"},
	}
	rows = append(rows, runTable(t, ctx, k, "CGNAT Pods, extraEgressExceptions [100.64.0.0/10]", ps, closed, map[int]bool{3: true, 4: true})...)
	withoutPolicies(t, ctx, k, []string{"dp-cgnat"}, func() {
		rows = append(rows, runTable(t, ctx, k, "control: CGNAT, policies deleted", ps, closed[:3], map[int]bool{0: true, 1: true, 2: true})...)
	})
	return rows
}

// checkWarnings: the render warns about each custom template whose refusals the table shows, with
// the reasons given, as the CLI and the function report them for the same objects.
func checkWarnings(t *testing.T, ctx context.Context, k *kube, want map[string][]string) {
	t.Helper()
	got := map[string][]string{}
	for name := range want {
		tmpl := &extv1beta1.SandboxTemplate{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: "dp-custom", Name: name}, tmpl); err != nil {
			t.Fatal(err)
		}
		for _, w := range render.TemplateNetworkPolicyWarnings(tmpl, render.Options{}) {
			got[name] = append(got[name], w.Reason)
		}
		slices.Sort(got[name])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the render's warnings by template (-want +got):\n%s", diff)
	}
}

// policiesIn waits until the controller has rendered a NetworkPolicy in each namespace, and
// gives kube-router the moment it takes to act on their watch events.
func policiesIn(t *testing.T, ctx context.Context, k *kube, namespaces ...string) {
	t.Helper()
	testenv.Eventually(t, timeout, "a NetworkPolicy in each managed namespace", func() error {
		for _, ns := range namespaces {
			list, err := k.cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) == 0 {
				return fmt.Errorf("none in %s", ns)
			}
		}
		return nil
	})
	time.Sleep(3 * time.Second)
}
