package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// TestInstall is `make e2e`: the release installed on the local cluster of internal/cluster
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok's fake nodes), with
// the controller run as a local process, as the ServiceAccount install.yaml creates.
func TestInstall(t *testing.T) {
	r := readRelease(t)
	bin := testenv.BinDir()
	if missing := cluster.MissingBinaries(bin); len(missing) > 0 {
		testenv.Missing(t, "%s not found in %s; run `make tools`", strings.Join(missing, ", "), bin)
	}
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: filepath.Join(t.TempDir(), "cluster"), Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	testInstall(t, ctx, c.Config, r, &localController{binary: r.binaryFromImage(t, "sandbox-controller", t.TempDir())})
	t.Run("the Argo CD plugin installed as docs/gitops.md says", func(t *testing.T) { checkArgoCDPlugin(t, ctx, c, newKube(t, c.Config), r) })
}

// localController runs the controller binary of the release's image on this machine. kwok's
// Pods run nothing, so the Deployment install.yaml creates is scaled to zero once it has shown
// that it schedules, and the webhook Service gets an EndpointSlice of a host link's address (the
// local cluster's API server routes webhooks to endpoints, --enable-aggregator-routing): the host
// end of a veth pair into a namespace of the test's own, never the machine's external interface.
type localController struct {
	binary     string
	args       []string
	logFile    string
	probes     string
	cmd        *exec.Cmd
	exited     chan error
	restarts   int
	kubeconfig string
}

func (l *localController) installed(t *testing.T, ctx context.Context, k *kube, r *release) {
	t.Helper()
	ns := webhook.DefaultNamespace
	testenv.Eventually(t, timeout, "the controller's Deployment available on the fake nodes", func() error {
		return k.deploymentAvailable(ctx, ns, controllerName)
	})
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: controllerName, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if _, err := k.cs.AppsV1().Deployments(ns).UpdateScale(ctx, controllerName, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "the Deployment's Pods gone", func() error {
		pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left", len(pods.Items))
		}
		return nil
	})

	link, err := cluster.NewHostLink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := link.Close(); err != nil {
			t.Error(err)
		}
	})
	ip := link.IP
	port := freePort(t, ip)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox-gitops-webhook-e2e", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: webhook.DefaultServiceName,
			discoveryv1.LabelManagedBy:   "e2e.sandbox-gitops.dev",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := k.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controller's identity is its ServiceAccount's: a token the API server issues for it.
	tok, err := k.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, controllerName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s/%s: %v", ns, controllerName, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: k.cfg.Host, CertificateAuthorityData: k.cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "sa"}
	kc.CurrentContext = "sa"
	dir := t.TempDir()
	l.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, l.kubeconfig); err != nil {
		t.Fatal(err)
	}
	l.logFile = filepath.Join(dir, "controller.log")
	l.probes = net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, net.IPv4(127, 0, 0, 1))))

	// The Deployment's own arguments, then what a process on this machine needs instead: its
	// kubeconfig, and ports of its own (the later flag wins).
	l.args = deploymentArgs(t, r.install, ns)
	l.args = append(l.args,
		"--kubeconfig="+l.kubeconfig,
		"--metrics-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, net.IPv4(127, 0, 0, 1)))),
		"--health-probe-bind-address="+l.probes,
		"--webhook-port="+strconv.Itoa(port),
	)
	t.Cleanup(func() {
		if l.cmd != nil && l.exited != nil {
			_ = l.cmd.Process.Kill()
			<-l.exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(l.logFile); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("the controller's last log lines (%s):\n%s", l.logFile, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
}

// deploymentArgs are the controller container's arguments in install.yaml, with $(POD_NAMESPACE)
// expanded as the kubelet would.
func deploymentArgs(t *testing.T, install []*unstructured.Unstructured, ns string) []string {
	t.Helper()
	for _, o := range install {
		if o.GetKind() != "Deployment" || o.GetName() != controllerName {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			var out []string
			args, _ := c.(map[string]any)["args"].([]any)
			for _, a := range args {
				out = append(out, strings.ReplaceAll(fmt.Sprint(a), "$(POD_NAMESPACE)", ns))
			}
			return out
		}
	}
	t.Fatalf("install.yaml has no Deployment %s", controllerName)
	return nil
}

func (l *localController) start(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	logs, err := os.OpenFile(l.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	fmt.Fprintf(logs, "=== start %d: %s %s\n", l.restarts, l.binary, strings.Join(l.args, " "))
	l.restarts++
	l.cmd = exec.Command(l.binary, l.args...)
	l.cmd.Stdout, l.cmd.Stderr = logs, logs
	if err := testenv.StartProcess(l.cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	l.exited = exited
	go func() { exited <- l.cmd.Wait() }()
	testenv.Eventually(t, timeout, "the controller ready", func() error {
		select {
		case err := <-exited:
			l.exited = nil
			t.Fatalf("the controller exited: %v (log: %s)", err, l.logFile)
		default:
		}
		return readyz(ctx, l.probes)
	})
}

func (l *localController) kill(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	if err := l.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.exited
	l.exited = nil
}

func (l *localController) stop(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-l.exited:
		l.exited = nil
		if err != nil {
			t.Errorf("the controller after SIGTERM: %v, want exit 0 (log: %s)", err, l.logFile)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the controller did not stop within 30 s of SIGTERM")
	}
}

func readyz(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// freePort is a port nobody listens on at ip at the moment.
func freePort(t *testing.T, ip net.IP) int {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}
