package scale_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/internal/cluster"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/benchkit"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var scheme = runtime.NewScheme()

func init() {
	// The benchmark's clients log nothing worth reading; without a logger controller-runtime
	// prints a warning with a stack trace.
	ctrllog.SetLogger(logr.Discard())
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme, renderv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// scaleEnv is a local cluster as upstream's kwok scalability test runs one (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and kwok with fake Nodes, at its limits), with our CRDs,
// and the controller binary ready to run against it.
type scaleEnv struct {
	c   *cluster.Cluster
	cfg *rest.Config
	cl  client.WithWatch
	// bin is the controller binary; kubeconfig the admin kubeconfig it runs with.
	bin, kubeconfig string
}

// startEnv starts a cluster with nodes fake Nodes and installs the CRDs; it stops when b ends.
func startEnv(b *testing.B, nodes int) *scaleEnv {
	b.Helper()
	if missing := cluster.MissingBinaries(testenv.BinDir()); len(missing) > 0 {
		testenv.Missing(b, "%s not in %s; run `make tools`", strings.Join(missing, ", "), testenv.BinDir())
	}
	dir := b.TempDir()
	start := time.Now()
	c, err := cluster.Start(context.Background(), cluster.Options{BinDir: testenv.BinDir(), Dir: filepath.Join(dir, "cluster"), Nodes: nodes, Scale: true, Timeout: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Stop() })
	say(b, "cluster with %d Nodes up in %v", nodes, time.Since(start).Round(100*time.Millisecond))
	e := &scaleEnv{c: c, cfg: rest.CopyConfig(c.Config), kubeconfig: c.Kubeconfig}
	// The benchmark's own clients must not be what limits it: the load generator's rate is the
	// scenario's.
	e.cfg.QPS, e.cfg.Burst = 5000, 10000
	if e.cl, err = client.NewWithWatch(e.cfg, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	crds, err := crd.All()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range crds {
		// Only v1beta1 is written and read here: no conversion webhook runs.
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	if err := testenv.InstallCRDs(e.cfg, crds); err != nil {
		b.Fatal(err)
	}
	if e.bin, err = benchkit.BuildController(testenv.RepoRoot(), dir); err != nil {
		b.Fatal(err)
	}
	return e
}

// controllerProc is the controller running as its own process.
type controllerProc struct {
	cmd     *exec.Cmd
	metrics string // its /metrics address
	pprof   string // its /debug/pprof address, with SANDBOX_SCALE_PROFILE
	stopped bool
}

// profile saves a CPU profile of the controller over d to $SANDBOX_SCALE_PROFILE/name, when
// profiling is on; it returns at once and writes when the profile is done.
func (p *controllerProc) profile(b *testing.B, name string, d time.Duration) {
	dir := os.Getenv("SANDBOX_SCALE_PROFILE")
	if dir == "" || p.pprof == "" {
		return
	}
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprof, int(d.Seconds())))
		if err != nil {
			say(b, "profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		_ = os.WriteFile(filepath.Join(dir, name), body, 0o644)
	}()
}

// profileAPIServer saves a CPU profile of the API server over d to $SANDBOX_SCALE_PROFILE/name,
// when profiling is on (the API server serves /debug/pprof to a cluster admin); it returns at
// once and writes when the profile is done.
func (e *scaleEnv) profileAPIServer(b *testing.B, name string, d time.Duration) {
	dir := os.Getenv("SANDBOX_SCALE_PROFILE")
	if dir == "" {
		return
	}
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		say(b, "profile %s: %v", name, err)
		return
	}
	go func() {
		body, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(int(d.Seconds()))).
			Timeout(d + time.Minute).DoRaw(context.Background())
		if err != nil {
			say(b, "profile %s: %v", name, err)
			return
		}
		_ = os.WriteFile(filepath.Join(dir, name), body, 0o644)
	}()
}

// startController runs the controller on namespace ns with upstream's scalability-test settings
// (1,000 requests a second, burst 2,000, 50 Sandbox and 50 claim workers) and extra flags.
func (e *scaleEnv) startController(b *testing.B, ns string, extra ...string) *controllerProc {
	b.Helper()
	metrics := testenv.FreeAddr(b)
	extra = append(strings.Fields(os.Getenv("SANDBOX_SCALE_CONTROLLER_ARGS")), extra...)
	var pprof string
	if os.Getenv("SANDBOX_SCALE_PROFILE") != "" {
		pprof = testenv.FreeAddr(b)
		extra = append(extra, "--pprof-bind-address", pprof)
	}
	args := append([]string{"--kubeconfig", e.kubeconfig, "--namespaces", ns, "--enable-webhook=false",
		"--kube-api-qps", "1000", "--kube-api-burst", "2000", "--sandbox-workers", "50", "--claim-workers", "50",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "0", "--zap-log-level", logLevel()}, extra...)
	cmd := niced(e.bin, args...)
	cmd.Stderr = os.Stderr
	if err := testenv.StartProcess(cmd); err != nil {
		b.Fatal(err)
	}
	p := &controllerProc{cmd: cmd, metrics: metrics, pprof: pprof}
	b.Cleanup(p.stop)
	return p
}

// niced is the command that runs bin with args, under `nice -n N` when SANDBOX_SCALE_NICE=N is
// set. In a cluster the controller runs on a node of its own, not on the API server's cores; on
// one machine the controller's CPU is taken from the API server that every claim waits on, and
// a lower priority gives the API server its cores first, as a node of its own would.
func niced(bin string, args ...string) *exec.Cmd {
	if n := os.Getenv("SANDBOX_SCALE_NICE"); n != "" {
		return exec.Command("nice", append([]string{"-n", n, bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

// stop kills the controller (as a node failure would: no graceful release of anything).
func (p *controllerProc) stop() {
	if !p.stopped {
		p.stopped = true
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// reconcilerSums is a read of the controller's /metrics: per reconciler, the sums and counts of
// controller-runtime's histograms of the time a request waited in its work queue and of a pass.
// Two reads bracket a window (queueTimes).
type reconcilerSums map[string]float64

// reconcilers are the reconcilers reported, by their controller-runtime names (upstream's are
// the same).
var reconcilers = []string{"sandboxclaim", "sandbox", "sandboxwarmpool"}

func (p *controllerProc) reconcilerSums() (reconcilerSums, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	sums := reconcilerSums{}
lines:
	for _, line := range strings.Split(string(body), "\n") {
		for _, c := range byKind {
			if rest, ok := strings.CutPrefix(line, c+`{kind="`); ok {
				if kind, v, ok := strings.Cut(rest, `"} `); ok {
					n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					sums[c+"|"+kind] += n
				}
				continue lines
			}
		}
		for _, m := range []string{"workqueue_queue_duration_seconds", "controller_runtime_reconcile_time_seconds"} {
			for _, part := range []string{"_sum{", "_count{"} {
				rest, ok := strings.CutPrefix(line, m+part)
				if !ok {
					continue
				}
				i := strings.LastIndex(rest, "} ")
				if i < 0 {
					continue
				}
				name := ""
				for _, kv := range strings.Split(rest[:i], ",") {
					if k, v, _ := strings.Cut(kv, "="); k == "name" || k == "controller" {
						name = strings.Trim(v, `"`)
					}
				}
				v, _ := strconv.ParseFloat(strings.TrimSpace(rest[i+2:]), 64)
				sums[m+"|"+part+"|"+name] += v
			}
		}
	}
	return sums, nil
}

// Our controller's counters of the passes it saved, by kind (upstream's controller has none):
// the status echoes that brought no pass, and the events of other objects deferred to a pass
// under way or to an awaited echo.
const (
	echoesMetric   = "sandbox_gitops_status_echoes_let_go_total"
	deferredMetric = "sandbox_gitops_events_deferred_total"
)

var byKind = []string{echoesMetric, deferredMetric}

// counted is how much counter (one of byKind) grew for kind between before and s.
func (s reconcilerSums) counted(before reconcilerSums, counter, kind string) float64 {
	return s[counter+"|"+kind] - before[counter+"|"+kind]
}

// passes is how many passes reconciler name made between before and s.
func (s reconcilerSums) passes(before reconcilerSums, name string) float64 {
	k := "controller_runtime_reconcile_time_seconds|_count{|" + name
	return s[k] - before[k]
}

// queueTimes says, per reconciler, the mean time a request waited in its work queue and the
// mean pass between before and s, and the passes.
func (s reconcilerSums) queueTimes(before reconcilerSums) string {
	var out []string
	for _, name := range reconcilers {
		d := func(m, part string) float64 { k := m + "|" + part + "|" + name; return s[k] - before[k] }
		q, qn := d("workqueue_queue_duration_seconds", "_sum{"), d("workqueue_queue_duration_seconds", "_count{")
		r, rn := d("controller_runtime_reconcile_time_seconds", "_sum{"), d("controller_runtime_reconcile_time_seconds", "_count{")
		if qn > 0 && rn > 0 {
			out = append(out, fmt.Sprintf("%s %v / %v over %.0f passes", name, time.Duration(q/qn*float64(time.Second)).Round(time.Millisecond),
				time.Duration(r/rn*float64(time.Second)).Round(time.Millisecond), rn))
		}
	}
	return strings.Join(out, "; ")
}

func logLevel() string {
	if l := os.Getenv("SANDBOX_BENCH_LOG"); l != "" {
		return l
	}
	return "error"
}

// newNamespace creates a namespace for one run.
func (e *scaleEnv) newNamespace(b *testing.B, name string) string {
	b.Helper()
	if err := e.cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		b.Fatal(err)
	}
	return name
}

// loadTestTemplate is upstream's load-test template: one alpine container that sleeps.
func loadTestTemplate(ns, name string) *extv1beta1.SandboxTemplate {
	t := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	t.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"app": "agent-sandbox-load-test"}
	t.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "sandbox", Image: "alpine",
		Command: []string{"/bin/sh", "-c", "echo 'Hello from the Agent Sandbox!'; sleep 28800"}}}
	return t
}

// fillPool creates upstream's load-test template and a warm pool of size members in ns and
// waits until every member is Ready (a controller must be running on ns).
func (e *scaleEnv) fillPool(b *testing.B, ns string, size int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := e.cl.Create(ctx, loadTestTemplate(ns, "template-0")); err != nil {
		b.Fatal(err)
	}
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "warmpool-0", Namespace: ns},
		Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(size)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "template-0"}}}
	if err := e.cl.Create(ctx, pool); err != nil {
		b.Fatal(err)
	}
	e.waitPool(b, ns, size, 20*time.Minute)
	return time.Since(start)
}

// waitPool waits until the pool of ns has size Ready members.
func (e *scaleEnv) waitPool(b *testing.B, ns string, size int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := e.readyMembers(ns)
		if err == nil && n >= size {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the pool of %s has %d of %d members Ready after %v (%v)", ns, n, size, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readyMembers counts the Ready Sandboxes of the pool in ns (still carrying its label).
func (e *scaleEnv) readyMembers(ns string) (int, error) {
	list := &agentsv1beta1.SandboxList{}
	if err := e.cl.List(context.Background(), list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.SandboxWarmPoolLabel}); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, agentsv1beta1.ConditionReady) && list.Items[i].DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// pids are the processes whose CPU a run reports: the cluster's and the controller's.
func (e *scaleEnv) pids(ctl *controllerProc) map[string]int {
	pids := e.c.PIDs()
	if ctl != nil && !ctl.stopped {
		pids["controller"] = ctl.cmd.Process.Pid
	}
	pids["benchmark"] = os.Getpid()
	return pids
}

// cpuSpent is each process's CPU between two readings of benchkit.CPU.
func cpuSpent(before, after map[string]time.Duration) map[string]time.Duration {
	out := make(map[string]time.Duration, len(after))
	for name, a := range after {
		out[name] = a - before[name]
	}
	return out
}

// cpuShare formats each process's CPU over a window (cpuSpent) as a share of one core, busiest
// first.
func cpuShare(spent map[string]time.Duration, wall time.Duration) string {
	type share struct {
		name string
		cpu  time.Duration
	}
	var shares []share
	for name, c := range spent {
		shares = append(shares, share{name, c})
	}
	slices.SortFunc(shares, func(x, y share) int { return cmp.Or(cmp.Compare(y.cpu, x.cpu), strings.Compare(x.name, y.name)) })
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%s %.2fs (%.0f%% of a core)", s.name, s.cpu.Seconds(), 100*s.cpu.Seconds()/wall.Seconds())
	}
	return strings.Join(parts, ", ")
}

// say prints a line of a benchmark's progress or results to stdout at once, under the
// benchmark's name. b.Logf would keep it until the benchmark ends, and then show only its first
// ten lines: a run of several scenarios, or of several runs, says far more than that.
func say(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Printf("    %s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}
