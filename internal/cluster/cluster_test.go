package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestCluster starts the local cluster and checks what envtest cannot: a Node that is Ready, a
// Deployment whose Pod is scheduled there and becomes Running and Ready with an IP (the
// deployment and replicaset controllers, the scheduler, kwok), an EndpointSlice for a Service
// selecting it (the endpointslice controller), and dependents deleted with their owner by the
// garbage collector. Then it stops the cluster and checks that none of its processes is left.
func TestCluster(t *testing.T) {
	bin := testenv.BinDir()
	if missing := cluster.MissingBinaries(bin); len(missing) > 0 {
		testenv.Missing(t, "%s not in %s; run `make tools` to build them from Go modules", strings.Join(missing, ", "), bin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	t.Logf("cluster started in %v", time.Since(start).Round(100*time.Millisecond))
	pids := c.PIDs()
	if len(pids) != len(cluster.Binaries) {
		t.Fatalf("running %v, want one process of each of %v", pids, cluster.Binaries)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("node is Ready", func(t *testing.T) {
		node, err := cs.CoreV1().Nodes().Get(ctx, cluster.NodeName(0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !nodeReady(node) {
			t.Fatalf("Node %s conditions %v, want Ready=True", node.Name, node.Status.Conditions)
		}
	})

	ns := "default"
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "registry.invalid/web:1", // kwok runs no container; the image is never pulled
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var pod corev1.Pod
	t.Run("deployment pod runs on the fake node", func(t *testing.T) {
		testenv.Eventually(t, 30*time.Second, "a Running, Ready Pod of Deployment web with an IP", func() error {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(pods.Items) != 1 {
				return fmt.Errorf("%d Pods", len(pods.Items))
			}
			pod = pods.Items[0]
			if pod.Spec.NodeName != cluster.NodeName(0) || pod.Status.Phase != corev1.PodRunning ||
				!podReady(&pod) || pod.Status.PodIP == "" {
				return fmt.Errorf("Pod %s on %q, phase %s, conditions %v, IP %q",
					pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions, pod.Status.PodIP)
			}
			return nil
		})
		testenv.Eventually(t, 30*time.Second, "Deployment web available", func() error {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.AvailableReplicas != 1 {
				return fmt.Errorf("status %+v", d.Status)
			}
			return nil
		})
	})
	if pod.Name == "" {
		t.FailNow()
	}

	t.Run("service gets an endpointslice", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "an EndpointSlice of Service web with the Pod's IP, ready", func() error {
			slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
				LabelSelector: discoveryv1.LabelServiceName + "=web"})
			if err != nil {
				return err
			}
			for _, s := range slices.Items {
				for _, ep := range s.Endpoints {
					if len(ep.Addresses) > 0 && ep.Addresses[0] == pod.Status.PodIP &&
						ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						return nil
					}
				}
			}
			return fmt.Errorf("EndpointSlices %v", slices.Items)
		})
	})

	t.Run("garbage collector deletes dependents", func(t *testing.T) {
		owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "dependent", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name,
				UID: owner.UID, BlockOwnerDeletion: ptr.To(true)}},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		foreground := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
		if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", foreground); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "ConfigMaps owner and dependent gone", func() error {
			for _, name := range []string{"dependent", "owner"} {
				if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("ConfigMap %s: still there (%v)", name, err)
				}
			}
			return nil
		})

		// The Deployment's ReplicaSet and Pod go the same way, the Pod's deletion completed by kwok
		// as a kubelet would.
		if err := cs.AppsV1().Deployments(ns).Delete(ctx, "web", foreground); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "Deployment web, its ReplicaSet and its Pod gone", func() error {
			if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment: still there (%v)", err)
			}
			rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil || len(rs.Items) > 0 {
				return fmt.Errorf("ReplicaSets: %d left (%v)", len(rs.Items), err)
			}
			if _, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Pod %s: still there (%v)", pod.Name, err)
			}
			return nil
		})
	})

	stopStart := time.Now()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Error(err)
	}
	t.Logf("cluster stopped in %v", time.Since(stopStart).Round(100*time.Millisecond))
	for name, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("%s (pid %d) still exists after Stop", name, pid)
		}
	}
	if left := processesMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes of the cluster left after Stop: %v", left)
	}
	if running := cluster.Running(dir); len(running) > 0 {
		t.Errorf("Running(%s) = %v after Stop", dir, running)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// processesMentioning lists the processes whose command line holds dir: every component of the
// cluster is started with paths under its state directory.
func processesMentioning(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}
