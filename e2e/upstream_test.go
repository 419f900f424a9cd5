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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

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
	createUpstreamController(t, ctx, k, corev1.Container{
		Name: upstreamControllerName,
		// Never pulled: kwok runs no container. The framework reads the tag as the
		// controller's version for its reports.
		Image: "ghcr.io/sandbox-gitops/sandbox-controller:e2e-upstream",
		Args:  args,
	})
	return args
}

// createUpstreamController creates the Deployment agent-sandbox-controller in
// agent-sandbox-system, labelled as upstream's framework looks for it, whose Pod runs container,
// and waits until it is available.
func createUpstreamController(t *testing.T, ctx context.Context, k *kube, container corev1.Container) {
	t.Helper()
	labels := map[string]string{"app": upstreamControllerName}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamControllerName, Namespace: upstreamSystemNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container}},
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
	c := startRealNodeCluster(t, filepath.Join(dir, "cluster"), archives)
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
	createUpstreamController(t, ctx, k, corev1.Container{
		Name: upstreamControllerName, Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"sleep", "2147483647"},
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

// formatSteps is the steps as a table, columns aligned.
func formatSteps(steps []sdkStep) string {
	width := len("STEP")
	for _, s := range steps {
		width = max(width, len(s.step))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s  %-*s  %s\n", "SDK", width, "STEP", "LATENCY")
	for _, s := range steps {
		fmt.Fprintf(&b, "%-6s  %-*s  %s\n", s.sdk, width, s.step, s.took)
	}
	return b.String()
}
