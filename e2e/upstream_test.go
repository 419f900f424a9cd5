package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/e2e/upstream"
	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

const (
	// upstreamBinEnv names the directory with upstream's e2e test binaries (upstream.Packages'
	// Binary, which `hack/tools.sh agent-sandbox-e2e.test agent-sandbox-e2e-extensions.test`
	// links into bin/); `make e2e-upstream` sets it.
	upstreamBinEnv = "SANDBOX_UPSTREAM_E2E"
	// upstreamOutEnv is the directory the run writes its table (results.md), the suite's events,
	// the controller's log, the cluster's state and the suite's artifacts to; default a
	// temporary directory.
	upstreamOutEnv = "SANDBOX_UPSTREAM_E2E_OUT"
	// upstreamRunEnv, when set, is a regular expression: only the suite's top-level tests it
	// matches run (`make e2e-upstream RUN=...`), and the table has only them.
	upstreamRunEnv = "SANDBOX_UPSTREAM_E2E_RUN"
	// upstreamPackageTimeout bounds each run of a test binary (go test's -test.timeout).
	upstreamPackageTimeout = 40 * time.Minute
)

// upstreamSystem is where upstream's framework looks for the controller before every test
// (validateAgentSandboxInstallation): the Deployment agent-sandbox-controller in namespace
// agent-sandbox-system, with Pods labelled app=agent-sandbox-controller whose logs it fetches
// when a test fails.
const (
	upstreamSystemNamespace = "agent-sandbox-system"
	upstreamControllerName  = "agent-sandbox-controller"
)

// TestUpstreamE2E is `make e2e-upstream`: upstream agent-sandbox's own e2e suite (test/e2e and
// test/e2e/extensions of upstream.Version, compiled from the Go module proxy's copy) against this
// repository's controller, on the local cluster of internal/cluster: kwok's fake nodes, with the
// stages in upstream/stages where the suite counts on a kubelet's timing (a Pod starts a second
// after it is scheduled, a deleted one stops before it goes, one that runs `sh -c "exit 0"`
// succeeds, one with a preStop hook stays Terminating for its grace period), and volumes made in
// advance for the suite's claims. The controller runs as a local process with
// --upstream-annotations, since the suite reads upstream's annotations, and without the
// conversion webhook, since the suite speaks only v1beta1; the Deployment the framework checks
// for is there, and its Pod runs nothing.
//
// Each package runs once with its listed tests (upstream.List) left out, then each StopAt test
// alone until it reaches its marker. The table is printed and written to results.md; the test
// fails on any problem upstream.Classify finds.
func TestUpstreamE2E(t *testing.T) {
	bins := os.Getenv(upstreamBinEnv)
	if bins == "" {
		t.Skipf("e2e-upstream: skipped: %s is not set; `make e2e-upstream` builds upstream's suite and runs this test", upstreamBinEnv)
	}
	for _, p := range upstream.Packages {
		if _, err := os.Stat(filepath.Join(bins, p.Binary)); err != nil {
			t.Fatalf("upstream's %s suite: %v; build it with `hack/tools.sh %s`", p.Name, err, p.Binary)
		}
	}
	bin := testenv.BinDir()
	if missing := cluster.MissingBinaries(bin); len(missing) > 0 {
		testenv.Missing(t, "%s not found in %s; run `make tools`", strings.Join(missing, ", "), bin)
	}
	list := upstream.List
	var only *regexp.Regexp
	if p := os.Getenv(upstreamRunEnv); p != "" {
		var err error
		if only, err = regexp.Compile(p); err != nil {
			t.Fatalf("%s=%q: %v", upstreamRunEnv, p, err)
		}
		list = slices.DeleteFunc(slices.Clone(list), func(l upstream.Listed) bool { return !only.MatchString(l.Test) })
	}
	out := os.Getenv(upstreamOutEnv)
	if out == "" {
		out = t.TempDir()
	}
	out, err := filepath.Abs(out)
	if err != nil {
		t.Fatal(err)
	}
	// Only what an earlier run of this test wrote there.
	for _, name := range []string{"results.md", "controller.log", "artifacts", "work", "events"} {
		if err := os.RemoveAll(filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"artifacts", "work", "events"} {
		if err := os.MkdirAll(filepath.Join(out, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stages, err := filepath.Glob(filepath.Join("upstream", "stages", "*.yaml"))
	if err != nil || len(stages) == 0 {
		t.Fatalf("no kwok stages in upstream/stages (%v)", err)
	}

	began := time.Now()
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Dir: filepath.Join(out, "cluster"), Nodes: 2, KwokStages: stages})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("cluster up in %v (state and logs: %s)", time.Since(began).Round(100*time.Millisecond), c.Dir)
	k := newKube(t, c.Config)
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(c.Config, crds); err != nil {
		t.Fatal(err)
	}
	controllerArgs := upstreamInstallation(t, ctx, k)
	createUpstreamVolumes(t, ctx, k)
	checkUpstreamCluster(t, ctx, k)

	ctrl := startUpstreamController(t, ctx, c.Kubeconfig, filepath.Join(out, "controller.log"), controllerArgs)

	suite := upstream.Suite{}
	var outcomes []upstream.Outcome
	for _, p := range upstream.Packages {
		binary := filepath.Join(bins, p.Binary)
		tests, err := listTests(binary)
		if err != nil {
			t.Fatal(err)
		}
		if only != nil {
			tests = slices.DeleteFunc(tests, func(test string) bool { return !only.MatchString(test) })
			if len(tests) == 0 {
				continue
			}
		}
		suite[p.Name] = tests
		env := upstream.Environ(os.Environ(), p, c.Kubeconfig, filepath.Join(out, "artifacts"))
		run := upstreamBinary{binary: binary, pkg: p.Name, env: env, dir: filepath.Join(out, "work", p.Name)}

		args := []string{"-test.parallel=1"}
		if only != nil {
			args = append(args, "-test.run="+only.String())
		}
		if skip := upstream.SkipPattern(list, p.Name); skip != "" {
			args = append(args, "-test.skip="+skip)
		}
		start := time.Now()
		got, err := run.run(t, filepath.Join(out, "events", p.Name+".json"), args, "")
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, got...)
		t.Logf("%s: %d tests and subtests in %v", p.Name, len(got), time.Since(start).Round(time.Second))

		for _, l := range upstream.StopAtTests(list, p.Name) {
			start := time.Now()
			got, err := run.run(t, filepath.Join(out, "events", p.Name+"."+l.Test+".json"), []string{"-test.run=" + upstream.RunPattern(l.Test)}, l.Marker)
			if err != nil {
				t.Fatal(err)
			}
			outcomes = append(outcomes, got...)
			t.Logf("%s %s: alone, until %q, in %v", p.Name, l.Test, l.Marker, time.Since(start).Round(time.Second))
		}
	}

	report := upstream.Classify(suite, outcomes, list)
	if err := ctrl.running(); err != nil {
		report.Problems = append(report.Problems, fmt.Sprintf("the controller: %v (log: %s)", err, ctrl.logFile))
	}
	table := upstream.Table(report)
	took := time.Since(began).Round(time.Second)
	subset := ""
	if only != nil {
		subset = fmt.Sprintf(" Only the tests %s=%q matches.", upstreamRunEnv, only)
	}
	doc := fmt.Sprintf("# Upstream agent-sandbox %s e2e suite against sandbox-controller\n\n"+
		"Run %s, %v in all, on the local cluster (kwok, with e2e/upstream/stages); the controller with %s.%s\n\n%s\n%s",
		upstream.Version, began.UTC().Format(time.RFC3339), took, strings.Join(ctrl.args, " "), subset, table, upstream.Details(report, 60))
	results := filepath.Join(out, "results.md")
	if err := os.WriteFile(results, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n%s\nThe table, each failure's output and the problems: %s (%v in all)\n", table, results, took)
	for _, p := range report.Problems {
		t.Error(p)
	}
}

// upstreamInstallation creates what upstream's framework checks before every test, beside the
// CRDs: namespace agent-sandbox-system and the Deployment agent-sandbox-controller, whose Pod
// kwok runs (it runs nothing: the controller is a local process), and waits until it is
// available, as after upstream's `make deploy`. It returns the controller's arguments, which the
// Deployment shows (upstream's TestParallel* rewrite them there; a rewrite restarts nothing
// here).
func upstreamInstallation(t *testing.T, ctx context.Context, k *kube) []string {
	t.Helper()
	args := []string{"--enable-webhook=false", "--upstream-annotations"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upstreamSystemNamespace}}
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": upstreamControllerName}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamControllerName, Namespace: upstreamSystemNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: upstreamControllerName,
					// Never pulled: kwok runs no container. The framework reads the tag as the
					// controller's version for its reports.
					Image: "ghcr.io/sandbox-gitops/sandbox-controller:e2e-upstream",
					Args:  args,
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
	return args
}

// upstreamVolumes are the PersistentVolumes the suite's PersistentVolumeClaims bind to: the local
// cluster has no provisioner, and a Pod with an unbound claim is never scheduled. They have no
// StorageClass, as the suite's claims ask for none, and the real PersistentVolume controller
// binds them as on a cluster with volumes made in advance. Nothing mounts them (kwok Pods run
// nothing); a claim's deletion leaves its volume Released (Retain), so there is one for every
// claim the suite makes (about 15), and more.
const upstreamVolumes = 64

func createUpstreamVolumes(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	for i := range upstreamVolumes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-upstream-%02d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/e2e-upstream/%02d", i)}},
			},
		}
		if _, err := k.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkUpstreamCluster shows that the cluster does what the suite needs of it before the suite
// counts on it: a Pod starts, Running and Ready; a deleted one is seen stopped (not Ready) and
// then gone; one running `sh -c "sleep 1; exit 0"` succeeds; a deleted one with a preStop hook is
// still there a second later and gone after its grace period; a claim binds to a volume.
func checkUpstreamCluster(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	ns := "e2e-upstream-check"
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := k.cs.CoreV1().Pods(ns)
	create := func(name string, spec corev1.PodSpec) {
		if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// phase is nil once the Pod has the phase and is Ready (or not) as asked.
	phase := func(name string, want corev1.PodPhase, ready bool) func() error {
		return func() error {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != want || podIsReady(p) != ready {
				return fmt.Errorf("Pod %s: phase %q, Ready %v; want %q, Ready %v", name, p.Status.Phase, podIsReady(p), want, ready)
			}
			return nil
		}
	}
	gone := func(name string) func() error {
		return func() error {
			if _, err := pods.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Pod %s still there (%v)", name, err)
			}
			return nil
		}
	}
	sleeper := corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep infinity"}}
	create("runs", corev1.PodSpec{Containers: []corev1.Container{sleeper}})
	create("exits", corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: "c", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 1; exit 0"},
	}}})
	hooked := sleeper
	hooked.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 1"}}}}
	create("hooked", corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](3), Containers: []corev1.Container{hooked}})

	testenv.Eventually(t, 30*time.Second, "Pod runs Running and Ready (stage e2e-upstream-pod-ready)", phase("runs", corev1.PodRunning, true))
	testenv.Eventually(t, 30*time.Second, "Pod exits Succeeded (stage e2e-upstream-pod-exit)", phase("exits", corev1.PodSucceeded, false))
	testenv.Eventually(t, 30*time.Second, "Pod hooked Running and Ready", phase("hooked", corev1.PodRunning, true))

	if err := pods.Delete(ctx, "runs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "deleted Pod runs stopped, not Ready (stage e2e-upstream-pod-stop)", phase("runs", corev1.PodRunning, false))
	testenv.Eventually(t, 10*time.Second, "Pod runs gone (stage e2e-upstream-pod-delete)", gone("runs"))

	if err := pods.Delete(ctx, "hooked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := pods.Get(ctx, "hooked", metav1.GetOptions{}); err != nil {
		t.Fatalf("Pod hooked a second after its deletion, with a preStop hook and 3 s of grace: %v, want it Terminating (stage e2e-upstream-pod-delete-prestop)", err)
	}
	testenv.Eventually(t, 30*time.Second, "Pod hooked gone after its grace period", gone("hooked"))

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if _, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "a claim of 1Gi Bound to one of the volumes", func() error {
		got, err := k.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	if err := k.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// upstreamController is this repository's controller, built from the working tree and run as a
// local process with the admin kubeconfig.
type upstreamController struct {
	args    []string
	logFile string
	cmd     *exec.Cmd
	exited  chan error
}

func startUpstreamController(t *testing.T, ctx context.Context, kubeconfig, logFile string, args []string) *upstreamController {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "sandbox-controller")
	build := exec.Command("go", "build", "-o", binary, "./cmd/sandbox-controller")
	build.Dir = testenv.RepoRoot()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sandbox-controller: %v\n%s", err, b)
	}
	probes := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, net.IPv4(127, 0, 0, 1))))
	u := &upstreamController{args: args, logFile: logFile, exited: make(chan error, 1)}
	logs, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	u.cmd = exec.Command(binary, append(append([]string{}, args...),
		"--kubeconfig="+kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address="+probes)...)
	u.cmd.Stdout, u.cmd.Stderr = logs, logs
	if err := testenv.StartProcess(u.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { u.exited <- u.cmd.Wait() }()
	t.Cleanup(func() {
		if u.running() != nil {
			return
		}
		_ = u.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.exited:
		case <-time.After(30 * time.Second):
			_ = u.cmd.Process.Kill()
			<-u.exited
		}
	})
	testenv.Eventually(t, timeout, "the controller ready", func() error {
		if err := u.running(); err != nil {
			t.Fatalf("the controller: %v (log: %s)", err, logFile)
		}
		return readyz(ctx, probes)
	})
	return u
}

// running is nil while the controller runs, else how it ended.
func (u *upstreamController) running() error {
	select {
	case err := <-u.exited:
		u.exited <- err // keep it for the next caller
		if err == nil {
			return errors.New("exited")
		}
		return fmt.Errorf("exited: %w", err)
	default:
		return nil
	}
}

// listTests is a test binary's top-level tests, in order.
func listTests(binary string) ([]string, error) {
	b, err := exec.Command(binary, "-test.list", ".*").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w", binary, err)
	}
	var tests []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Test") {
			tests = append(tests, l)
		}
	}
	return tests, nil
}

// upstreamBinary runs one of upstream's test binaries.
type upstreamBinary struct {
	binary, pkg string
	env         []string
	// dir is the working directory: the suite writes relative paths (artifacts, reports) there
	// when told nothing else.
	dir string
}

// run runs the binary with args, its output turned into test2json events by `go tool test2json`
// and kept in eventsFile, and returns the outcomes. With stop not empty the binary is killed
// (with anything it started, such as kubectl) the moment a line of its output contains stop.
func (b upstreamBinary) run(t *testing.T, eventsFile string, args []string, stop string) ([]upstream.Outcome, error) {
	t.Helper()
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, err
	}
	events, err := os.OpenFile(eventsFile, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer events.Close()

	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.binary, append([]string{"-test.v=test2json", "-test.count=1",
		"-test.timeout=" + upstreamPackageTimeout.String()}, args...)...)
	cmd.Dir, cmd.Env = b.dir, b.env
	cmd.Stdout, cmd.Stderr = pw, pw
	// A group of its own, so that a stop kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	conv := exec.Command("go", "tool", "test2json", "-t", "-p", b.pkg)
	conv.Stdin = pr
	convOut, err := conv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	conv.Stderr = os.Stderr
	if err := testenv.StartProcess(conv); err != nil {
		return nil, err
	}
	if err := testenv.StartProcess(cmd); err != nil {
		_ = pw.Close()
		_ = pr.Close()
		_ = conv.Wait()
		return nil, err
	}
	_ = pw.Close()
	_ = pr.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	stopped := false
	sc := bufio.NewScanner(convOut)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := events.Write(append(line, '\n')); err != nil {
			return nil, err
		}
		if stop == "" || stopped {
			continue
		}
		var e struct{ Action, Output string }
		if json.Unmarshal(line, &e) == nil && e.Action == "output" && strings.Contains(e.Output, stop) {
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	<-waited // its exit status is in the events: a failed test, or the kill
	if err := conv.Wait(); err != nil {
		// test2json exits 1 when the binary did; only a missing verdict matters, and the
		// outcomes show it.
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return nil, fmt.Errorf("go tool test2json: %w", err)
		}
	}
	if _, err := events.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return upstream.ParseEvents(b.pkg, events)
}
