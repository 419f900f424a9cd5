package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// startupRunsEnv sets how many times each delay of TestStartupTakeover runs (default 20).
const startupRunsEnv = "SANDBOX_STARTUP_RUNS"

// startupDelays are the moments after the apply at which TestStartupTakeover starts the
// controller: at once, while the first watch events are still on their way, and after the
// cluster has settled.
var startupDelays = []time.Duration{0, 100 * time.Millisecond, time.Second, 5 * time.Second}

// TestStartupTakeover is the newcomer's first minutes (issue 36): the built docs/example applied
// as the README shows, then the controller started at each of startupDelays. Whatever the delay,
// the cluster must end exactly as the preview: each claim takes over the Sandbox the tree carries
// under its name and adopts no warm member, and there is no Sandbox or Pod the build did not
// show. Each run has a namespace of its own and a controller limited to it; the delays run side by
// side.
func TestStartupTakeover(t *testing.T) {
	r := readRelease(t)
	bin := testenv.BinDir()
	if missing := cluster.MissingBinaries(bin); len(missing) > 0 {
		testenv.Missing(t, "%s not found in %s; run `make tools`", strings.Join(missing, ", "), bin)
	}
	runs := 20
	if v := os.Getenv(startupRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of runs", startupRunsEnv, v)
		}
		runs = n
	}
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: filepath.Join(t.TempDir(), "cluster"), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	k := newKube(t, c.Config)
	var crds []*unstructured.Unstructured
	for _, o := range r.install {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	k.apply(t, ctx, "the release's CRDs", installManager, crds)
	testenv.Eventually(t, timeout, "the CRDs established", func() error { return crdsEstablished(ctx, k, crds) })

	s := &startup{k: k, controller: r.binaryFromImage(t, "sandbox-controller", t.TempDir()),
		render: r.binaryFromImage(t, "sandbox-render", t.TempDir()), kubeconfig: c.Kubeconfig}
	var mu sync.Mutex
	var report []string
	t.Run("delays", func(t *testing.T) {
		for _, delay := range startupDelays {
			t.Run(delay.String(), func(t *testing.T) {
				t.Parallel()
				held := 0
				for i := range runs {
					ns := fmt.Sprintf("startup-%d-%d", delay.Milliseconds(), i)
					took, err := s.run(t, ctx, ns, delay)
					if err != nil {
						t.Errorf("run %d (namespace %s, controller started %v after the apply): %v", i, ns, delay, err)
						continue
					}
					held++
					mu.Lock()
					report = append(report, fmt.Sprintf("%v run %d: converged %v after the controller's start", delay, i, took.Round(time.Millisecond)))
					mu.Unlock()
				}
				t.Logf("delay %v: %d of %d runs exact", delay, held, runs)
			})
		}
	})
	slices.Sort(report)
	t.Logf("each run:\n  %s", strings.Join(report, "\n  "))
}

// startup is what every run of TestStartupTakeover shares: the cluster, the release's binaries.
type startup struct {
	k                  *kube
	controller, render string
	kubeconfig         string
	portMu             sync.Mutex
}

// run is one run in namespace ns: build docs/example for ns, apply it as the README shows,
// start the controller delay later, and check that the cluster converges to exactly the build's
// Sandboxes and Pods, each claim on the Sandbox of its own name. It returns how long convergence
// took from the controller's start.
func (s *startup) run(t *testing.T, ctx context.Context, ns string, delay time.Duration) (time.Duration, error) {
	t.Helper()
	built, err := s.build(t, ns)
	if err != nil {
		return 0, err
	}
	if _, err := s.k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer func() {
		// The next runs do not wait for this namespace to go: nothing of it is read again.
		_ = s.k.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	s.k.apply(t, ctx, "docs/example as built for "+ns, installManager, built)
	time.Sleep(delay)

	dir := t.TempDir()
	logFile := filepath.Join(dir, "controller.log")
	probes := s.probeAddress(t)
	cmd := exec.Command(s.controller, "--kubeconfig="+s.kubeconfig, "--namespaces="+ns, "--enable-webhook=false",
		"--health-probe-bind-address="+probes, "--metrics-bind-address=0")
	logs, err := os.Create(logFile)
	if err != nil {
		return 0, err
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := testenv.StartProcess(cmd); err != nil {
		return 0, err
	}
	start := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	want := map[string][]string{}
	var claims []string
	for _, o := range built {
		switch o.GetKind() {
		case agentsv1beta1.SandboxKind, "Pod":
			want[o.GetKind()] = append(want[o.GetKind()], o.GetName())
		case extv1beta1.SandboxClaimKind:
			claims = append(claims, o.GetName())
		}
	}
	for _, v := range want {
		slices.Sort(v)
	}
	converged := func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("the controller exited: %v (log %s)", err, logFile)
		default:
		}
		for _, name := range claims {
			cl := &extv1beta1.SandboxClaim{}
			if err := s.k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
				return err
			}
			if got := cl.Status.SandboxStatus.Name; got != "" && got != name {
				return permanent{fmt.Errorf("claim %s got Sandbox %q, not the one of its name the tree carries", name, got)}
			}
			if !meta.IsStatusConditionTrue(cl.Status.Conditions, agentsv1beta1.ConditionReady) {
				return fmt.Errorf("claim %s not Ready", name)
			}
		}
		got, err := s.names(ctx, ns)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("the Sandboxes and Pods differ from the build (-build +cluster):\n%s", diff)
		}
		return nil
	}
	var last error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if last = converged(); last == nil {
			break
		}
		if p, ok := last.(permanent); ok {
			return 0, p.error
		}
	}
	if last != nil {
		return 0, fmt.Errorf("not converged within %v: %v (log %s)", timeout, last, logFile)
	}
	took := time.Since(start)
	// A claim that adopted a member says so at once (its status names the member); a Sandbox or
	// Pod made a moment after convergence shows within the hold.
	for until := time.Now().Add(startupHold); time.Now().Before(until); time.Sleep(500 * time.Millisecond) {
		if err := converged(); err != nil {
			return 0, fmt.Errorf("converged after %v, then: %v (log %s)", took, err, logFile)
		}
	}
	return took, nil
}

// startupHold is how long a converged run must stay exact.
const startupHold = 2 * time.Second

// permanent is a convergence error no wait can mend.
type permanent struct{ error }

// build runs the release's sandbox-render build on a copy of docs/example whose kustomization
// puts it in ns (pool members are named after their namespace, so the tree is built per run).
func (s *startup) build(t *testing.T, ns string) ([]*unstructured.Unstructured, error) {
	src := filepath.Join(testenv.RepoRoot(), "docs", "example")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return nil, err
		}
		if e.Name() == "kustomization.yaml" {
			old := "namespace: " + exampleNamespace + "\n"
			if !bytes.Contains(b, []byte(old)) {
				return nil, fmt.Errorf("docs/example/kustomization.yaml has no %q", strings.TrimSpace(old))
			}
			b = bytes.Replace(b, []byte(old), []byte("namespace: "+ns+"\n"), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(s.render, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("sandbox-render build: %v: %s", err, stderr.String())
	}
	objs, err := manifest.Parse("build of docs/example", stdout.Bytes())
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() != ns && o.GetKind() != "Namespace" {
			return nil, fmt.Errorf("the build put %s %s in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
	}
	return objs, nil
}

// names are the names of the Sandboxes and Pods in ns that are not being deleted, sorted, by kind.
func (s *startup) names(ctx context.Context, ns string) (map[string][]string, error) {
	out := map[string][]string{}
	sbs := &agentsv1beta1.SandboxList{}
	if err := s.k.c.List(ctx, sbs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, sb := range sbs.Items {
		if sb.DeletionTimestamp == nil {
			out[agentsv1beta1.SandboxKind] = append(out[agentsv1beta1.SandboxKind], sb.Name)
		}
	}
	pods, err := s.k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out["Pod"] = append(out["Pod"], p.Name)
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out, nil
}

// probeAddress is a loopback address for a controller's probes that no other run holds.
func (s *startup) probeAddress(t *testing.T) string {
	s.portMu.Lock()
	defer s.portMu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, net.IPv4(127, 0, 0, 1))))
}
