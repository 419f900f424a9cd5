package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// kindEnv turns TestInstallKind on: it needs a container engine and minutes of image pulls, so
// only `make e2e-kind` runs it.
const kindEnv = "SANDBOX_E2E_KIND"

// kindCluster is the name of the cluster TestInstallKind creates and deletes.
const kindCluster = "sandbox-gitops-e2e"

// TestInstallKind is `make e2e-kind`: the same body as TestInstall on a kind cluster made with
// kind's Go library, with the release's images loaded into its nodes, so the controller and the
// router run in the cluster from install.yaml and router.yaml as released.
func TestInstallKind(t *testing.T) {
	if os.Getenv(kindEnv) == "" {
		t.Skipf("e2e-kind: skipped: %s is not set; `make e2e-kind` runs this test", kindEnv)
	}
	engine, err := containerEngine()
	if err != nil {
		t.Skipf("e2e-kind: skipped: %v", err)
	}
	r := readRelease(t)
	provider := cluster.NewProvider(engine)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	t.Logf("creating kind cluster %s", kindCluster)
	if err := provider.Create(kindCluster, cluster.CreateWithWaitForReady(3*time.Minute), cluster.CreateWithKubeconfigPath(kubeconfig),
		cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false)); err != nil {
		t.Fatalf("creating kind cluster %s: %v", kindCluster, err)
	}
	t.Cleanup(func() {
		if err := provider.Delete(kindCluster, kubeconfig); err != nil {
			t.Errorf("deleting kind cluster %s: %v", kindCluster, err)
		}
	})
	nodes, err := provider.ListInternalNodes(kindCluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range images {
		archive := filepath.Join(r.dir, "images", name+".tar")
		for _, n := range nodes {
			if err := loadArchive(n, archive); err != nil {
				t.Fatalf("loading %s into node %s: %v", archive, n.String(), err)
			}
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	testInstall(t, context.Background(), cfg, r, inCluster{})
}

func loadArchive(n nodes.Node, archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	return nodeutils.LoadImageArchive(n, f)
}

// containerEngine is kind's provider for the first of docker, podman and nerdctl whose engine
// answers `info`. kind's own detection only asks whether the client runs (`docker -v`), which
// it does on a machine with the client and no engine; its create then fails a minute in.
func containerEngine() (cluster.ProviderOption, error) {
	var tried []string
	for _, e := range []struct {
		bin      string
		provider func() cluster.ProviderOption
	}{
		{"docker", cluster.ProviderWithDocker},
		{"podman", cluster.ProviderWithPodman},
		{"nerdctl", func() cluster.ProviderOption { return cluster.ProviderWithNerdctl("") }},
	} {
		if _, err := exec.LookPath(e.bin); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, e.bin, "info").CombinedOutput()
		cancel()
		if err == nil {
			return e.provider(), nil
		}
		last := strings.TrimSpace(string(out))
		if i := strings.LastIndex(last, "\n"); i >= 0 {
			last = last[i+1:]
		}
		tried = append(tried, fmt.Sprintf("`%s info` failed (%s)", e.bin, last))
	}
	if len(tried) == 0 {
		return nil, errors.New("no docker, podman or nerdctl on this machine, and kind runs its nodes in one")
	}
	return nil, fmt.Errorf("no container engine answers, and kind runs its nodes in one: %s", strings.Join(tried, "; "))
}

// inCluster is the controller as install.yaml runs it: its Deployment, in the cluster.
type inCluster struct{}

func (inCluster) installed(t *testing.T, ctx context.Context, k *kube, r *release) {}

func (inCluster) start(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, "the controller's Deployment available", func() error {
		return k.deploymentAvailable(ctx, webhook.DefaultNamespace, controllerName)
	})
}

// kill deletes the leader's Pod at once (no grace period), as a lost node would; start then
// waits for the Deployment to replace it.
func (inCluster) kill(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	ns := webhook.DefaultNamespace
	var leader string
	testenv.Eventually(t, timeout, "a leader", func() error {
		lease, err := k.cs.CoordinationV1().Leases(ns).Get(ctx, controllerName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("the Lease has no holder")
		}
		// controller-runtime's identity is <hostname>_<uuid>; a Pod's hostname is its name.
		leader, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		return nil
	})
	zero := int64(0)
	if err := k.cs.CoreV1().Pods(ns).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting the leader's Pod %s: %v", leader, err)
	}
}

func (inCluster) stop(t *testing.T, ctx context.Context, k *kube) {}
