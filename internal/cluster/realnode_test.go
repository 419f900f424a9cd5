package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// RequireRealNode skips a test that needs the real node unless SANDBOX_REAL_NODE=1 (make
// e2e-node sets it): the node needs root, Debian's containerd and the node's tools, and only one
// runs on a machine at a time, so `go test ./...` does not start one beside its other packages.
func requireRealNode(t *testing.T) string {
	t.Helper()
	if os.Getenv("SANDBOX_REAL_NODE") != "1" {
		t.Skip("the real node runs under make e2e-node (SANDBOX_REAL_NODE=1)")
	}
	bin := testenv.BinDir()
	var missing []string
	for _, b := range append(slices.Clone(cluster.Binaries), cluster.NodeBinaries...) {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		testenv.Missing(t, "%s not in %s; run `make tools`", strings.Join(missing, ", "), bin)
	}
	return bin
}

// TestRealNode starts a cluster with the real node and checks what only a real node shows: a Pod
// that runs a process, resolves a Service name through CoreDNS, writes to a volume the
// provisioner bound, and whose log the API server fetches from kubelet; that the node has no
// route off the machine; and that after Stop nothing of the node is left on the host: no
// process, network namespace, interface, route, iptables rule, mount, cgroup or changed kernel
// tunable.
func TestRealNode(t *testing.T) {
	bin := requireRealNode(t)
	before := hostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: dir, RealNode: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	t.Logf("cluster with a real node Ready in %v", time.Since(start).Round(100*time.Millisecond))

	t.Run("the node has no default route", func(t *testing.T) {
		out, err := c.InNode(ctx, "ip", "-4", "route", "show", "default")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(out)) != "" {
			t.Fatalf("the node's namespace has a default route: %s", out)
		}
		out, err = c.InNode(ctx, "ip", "-6", "route", "show", "default")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(out)) != "" {
			t.Fatalf("the node's namespace has an IPv6 default route: %s", out)
		}
	})

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a Pod runs, resolves a Service through CoreDNS and writes to a bound volume", func(t *testing.T) {
		ns := "default"
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "probe", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/usr/local/bin/busybox", "sh", "-c",
						"/usr/local/bin/busybox nslookup kubernetes.default.svc.cluster.local && echo written > /data/file && /usr/local/bin/busybox cat /data/file"},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var phase corev1.PodPhase
		for phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			select {
			case <-ctx.Done():
				t.Fatalf("Pod probe still %s", phase)
			case <-time.After(500 * time.Millisecond):
			}
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			phase = p.Status.Phase
		}
		logs, err := cs.CoreV1().Pods(ns).GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("reading the Pod's log through kubelet: %v", err)
		}
		if phase != corev1.PodSucceeded {
			t.Fatalf("Pod probe %s; its log:\n%s", phase, logs)
		}
		for _, want := range []string{"10.96.0.1", "written"} {
			if !strings.Contains(string(logs), want) {
				t.Errorf("the Pod's log has no %q:\n%s", want, logs)
			}
		}
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.ClaimBound {
			t.Errorf("PVC data is %s, want Bound", got.Status.Phase)
		}
	})

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Errorf("the host after Stop differs from before Start (-before +after):\n%s", diff)
	}
}

// hostState is what a node could leave behind on the host: processes of the node's programs,
// network namespaces, interfaces, routes, iptables rules, mounts, kubepods cgroups and the kernel
// tunables kubelet writes.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var procs []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		switch name := strings.TrimSpace(string(comm)); name {
		case "containerd", "containerd-shim", "containerd-shim-runc-v2", "kubelet", "kube-proxy", "kube-router", "coredns", "local-path-prov", "pause", "runc":
			procs = append(procs, name)
		}
	}
	slices.Sort(procs)
	var mounts []string
	for _, line := range strings.Split(run("cat", "/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			mounts = append(mounts, f[4])
		}
	}
	slices.Sort(mounts)
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	tunables := map[string]string{}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		v, _ := os.ReadFile("/proc/sys/" + k)
		tunables[k] = strings.TrimSpace(string(v))
	}
	return map[string]string{
		"processes": strings.Join(procs, "\n"),
		"netns":     run("ip", "netns", "list"),
		"links":     linkNames(run("ip", "-o", "link", "show")),
		"routes":    run("ip", "route", "show", "table", "all"),
		"iptables":  stripComments(run("iptables-save")),
		"ip6tables": stripComments(run("ip6tables-save")),
		"mounts":    strings.Join(mounts, "\n"),
		"cgroups":   strings.Join(cgroups, "\n"),
		"tunables":  cmp.Diff(nil, tunables),
	}
}

// linkNames keeps each interface's index and name from `ip -o link show` (counters and flags
// change on their own).
func linkNames(out string) string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, f[0]+" "+f[1])
		}
	}
	return strings.Join(names, "\n")
}

// stripComments drops iptables-save's comment lines, which carry the time of the dump.
func stripComments(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "#") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// TestRealNodeDown is `make cluster REAL_NODE=1` and `make cluster-down`: a detached cluster with
// the real node, stopped from its pid files by Down, leaves the host as it found it.
func TestRealNodeDown(t *testing.T) {
	bin := requireRealNode(t)
	before := hostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: dir, RealNode: true, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	down := false
	t.Cleanup(func() {
		if !down {
			_ = cluster.Down(dir)
		}
	})
	if running := cluster.Running(dir); len(running) < 6 {
		t.Fatalf("running after a detached start: %v, want the control plane and the node's components", running)
	}
	if _, err := c.InNode(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	down = true
	if err := cluster.Down(dir); err != nil {
		t.Fatal(err)
	}
	if running := cluster.Running(dir); len(running) > 0 {
		t.Fatalf("still running after Down: %v", running)
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Errorf("the host after Down differs from before Start (-before +after):\n%s", diff)
	}
}
