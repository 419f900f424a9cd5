package controller_test

import (
	"bufio"
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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/benchkit"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// BenchmarkConverge measures what issue "Controller, part 1" targets, on the real API server
// with the simulated kubelet: N Sandboxes (one container, port 8888, service: true) created
// together by 50 workers, until all are Ready. The controller runs as its own process (the
// binary of cmd/sandbox-controller, as its ServiceAccount) so its peak RSS and CPU time are its
// own. Writes are the API server's apiserver_request_total for what the controller writes
// (Pods, Services, Sandbox status, events), per Sandbox. Two floors, in the same run: the
// issue's, the same Pods and Services created directly by 50 workers until all Pods are Ready
// (floorDirect); and every write the Sandboxes require, their creates and status included, sent
// with no controller (floorRequired). The CRDs convert as envtest's default installs them (see
// convertAsEnvtest).
//
// Run with `make bench` (or `go test -run '^$' -bench Converge ./controller/`); one iteration
// per size; SANDBOX_BENCH_SIZES overrides the sizes (default 1000,2000,4000) and
// SANDBOX_BENCH_STEADY the window after convergence in which writes must be zero (default 60s).
// SANDBOX_BENCH_PROFILE=DIR writes the controller's heap profiles there: heap-N-peak.pb.gz,
// taken when its resident set last grew (with its /proc status), cpu-N.pb.gz over the first
// SANDBOX_BENCH_CPU_SECONDS (default 30) of the run (and apiserver-cpu-N.pb.gz, the API
// server's), heap-N-end.pb.gz, once all are
// Ready (read them with `go tool pprof -sample_index=inuse_space`), and gctrace-N.txt, the
// controller's standard error under GODEBUG=gctrace=1, and metrics-N.txt, its /metrics. SANDBOX_BENCH_CONTROLLER=BINARY runs that
// binary instead of building cmd/sandbox-controller (to measure an earlier version the same way).
func BenchmarkConverge(b *testing.B) {
	convertAsEnvtest(b)
	bin := os.Getenv("SANDBOX_BENCH_CONTROLLER")
	if bin == "" {
		bin = buildController(b)
	}
	kubeconfig := writeKubeconfig(b, asController)
	steady := 60 * time.Second
	if s := os.Getenv("SANDBOX_BENCH_STEADY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		steady = d
	}
	sizes := []int{1000, 2000, 4000}
	if s := os.Getenv("SANDBOX_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("sandboxes=%d", n), func(b *testing.B) {
			for range b.N {
				floor, floorServerCPU := floorDirect(b, n)
				required, requiredServerCPU := floorRequired(b, n, false)
				asked, askedServerCPU := floorRequired(b, n, true)
				r := convergeOnce(b, bin, kubeconfig, n, steady)
				b.ReportMetric(r.seconds, "s-to-ready")
				b.ReportMetric(floor, "s-floor")
				b.ReportMetric(r.seconds/floor, "x-floor")
				b.ReportMetric(required, "s-required")
				b.ReportMetric(r.seconds/required, "x-required")
				b.ReportMetric(requiredServerCPU, "s-cpu-apiserver+etcd-required")
				b.ReportMetric(asked, "s-required-as-issue-asks")
				b.ReportMetric(r.seconds/asked, "x-required-as-issue-asks")
				b.ReportMetric(askedServerCPU, "s-cpu-apiserver+etcd-required-as-issue-asks")
				b.ReportMetric(r.writes/float64(n), "writes/sandbox")
				b.ReportMetric(r.writesNoEvents/float64(n), "writes-excl-events/sandbox")
				b.ReportMetric(r.steadyWrites, "writes-after")
				b.ReportMetric(r.peakRSSMiB, "MiB-peak-rss")
				b.ReportMetric(r.cpuSeconds, "s-cpu")
				b.ReportMetric(r.serverCPUSeconds, "s-cpu-apiserver+etcd")
				b.ReportMetric(floorServerCPU, "s-cpu-apiserver+etcd-floor")
				b.Logf("n=%d: ready in %.1fs (floor %.1fs, every required write without a controller %.1fs, and sent as the issue asks %.1fs), writes by kind %v, in the %v after %v; %s",
					n, r.seconds, floor, required, asked, r.byKind, steady, r.steadyByKind, r.phases)
			}
		})
	}
}

type convergeResult struct {
	seconds, writes, writesNoEvents, steadyWrites, peakRSSMiB, cpuSeconds float64
	// serverCPUSeconds is what kube-apiserver and etcd spent until all were Ready.
	serverCPUSeconds float64
	byKind           map[string]float64
	// steadyByKind are the writes of the window after convergence, by resource and verb.
	steadyByKind map[string]float64
	phases       string
}

func convergeOnce(b *testing.B, bin, kubeconfig string, n int, steady time.Duration) convergeResult {
	ns := newNamespace(b)
	profileDir := os.Getenv("SANDBOX_BENCH_PROFILE")
	pprofAddr, metricsAddr := "", "0"
	if profileDir != "" {
		pprofAddr, metricsAddr = freeAddr(b), freeAddr(b)
	}
	args := []string{"--kubeconfig", kubeconfig, "--namespaces", ns,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0", "--enable-webhook=false", "--zap-log-level", "error"}
	if pprofAddr != "" {
		args = append(args, "--pprof-bind-address", pprofAddr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if profileDir != "" {
		// The collector's trace (live heap and goal at every cycle) goes next to the profiles,
		// which sample every 8 KiB allocated rather than 512 KiB.
		f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("gctrace-%d.txt", n)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stderr = f
		cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1,memprofilerate=8192")
	}
	if err := testenv.StartProcess(cmd); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(2 * time.Second) // the controller's caches sync
	if profileDir != "" {
		stop := profileAtPeak(b, cmd.Process.Pid, pprofAddr, filepath.Join(profileDir, fmt.Sprintf("heap-%d-peak.pb.gz", n)))
		cpu := make(chan struct{})
		seconds := cmp.Or(os.Getenv("SANDBOX_BENCH_CPU_SECONDS"), "30")
		go func() {
			// The CPU profiles cover the first seconds of the run, at least the creations.
			defer close(cpu)
			saveProfile(b, pprofAddr, "profile?seconds="+seconds, filepath.Join(profileDir, fmt.Sprintf("cpu-%d.pb.gz", n)))
		}()
		serverCPU := make(chan struct{})
		go func() {
			defer close(serverCPU)
			cs, err := kubernetes.NewForConfig(env.Config)
			if err != nil {
				b.Error(err)
				return
			}
			data, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).Timeout(5 * time.Minute).DoRaw(context.Background())
			if err == nil {
				err = os.WriteFile(filepath.Join(profileDir, fmt.Sprintf("apiserver-cpu-%d.pb.gz", n)), data, 0o644)
			}
			if err != nil {
				b.Logf("the API server's CPU profile: %v", err)
			}
		}()
		defer func() {
			// The controller's own metrics (reconciles, queue, client requests) go with them.
			if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = os.WriteFile(filepath.Join(profileDir, fmt.Sprintf("metrics-%d.txt", n)), data, 0o644)
			}
			stop()
			<-cpu
			<-serverCPU
			saveHeapProfile(b, pprofAddr, filepath.Join(profileDir, fmt.Sprintf("heap-%d-end.pb.gz", n)))
		}()
	}

	allReady := watchReady(b, ns, &agentsv1beta1.SandboxList{}, n, func(o client.Object) bool {
		c := findCondition(o.(*agentsv1beta1.Sandbox), agentsv1beta1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	before := writeCounts(b)
	requestsBefore := requestCounts(b)
	serverCPU := controlPlaneCPU(b)
	start := time.Now()
	creates := startParallel(50, n, func(i int) error {
		return admin.Create(context.Background(), sandbox(ns, fmt.Sprintf("sb-%05d", i), func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.Service = ptr.To(true)
		}))
	})
	end := awaitReady(b, allReady, n, "Sandboxes", creates)
	r := convergeResult{seconds: end.Sub(start).Seconds(), serverCPUSeconds: controlPlaneCPU(b) - serverCPU}
	// Writes still in flight when the last status lands (events are sent asynchronously) are
	// part of converging; wait for the API server to see them.
	time.Sleep(2 * time.Second)
	mid := writeCounts(b)
	if profileDir != "" {
		// Every request the API server served meanwhile (reads too, and the test's own), to
		// see where its time goes.
		after := requestCounts(b)
		var lines []string
		for k, v := range after {
			if d := v - requestsBefore[k]; d > 0 {
				lines = append(lines, fmt.Sprintf("%8.0f %s", d, k))
			}
		}
		slices.Sort(lines)
		if err := os.WriteFile(filepath.Join(profileDir, fmt.Sprintf("requests-%d.txt", n)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			b.Error(err)
		}
	}
	r.writes, r.byKind = controllerWrites(before, mid)
	r.writesNoEvents = r.writes - r.byKind["events POST"] - r.byKind["events PATCH"]
	time.Sleep(steady)
	r.steadyWrites, r.steadyByKind = controllerWrites(mid, writeCounts(b))
	r.peakRSSMiB, r.cpuSeconds = procStats(b, cmd.Process.Pid)
	r.phases = phases(b, ns)
	return r
}

// phases says where a Sandbox's time to Ready went, from the timestamps the API server keeps
// (whole seconds): Sandbox created → its Pod created (the controller), Pod created → Pod Ready
// (the simulated kubelet), Pod Ready → Sandbox Ready (the controller), as median/90th/max.
func phases(b *testing.B, ns string) string {
	sandboxes := &agentsv1beta1.SandboxList{}
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), sandboxes, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	if err := admin.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	podOf := map[string]*corev1.Pod{}
	for i := range pods.Items {
		podOf[pods.Items[i].Name] = &pods.Items[i]
	}
	var toPod, podReady, toReady []float64
	for i := range sandboxes.Items {
		sb := &sandboxes.Items[i]
		pod, ready := podOf[sb.Name], findCondition(sb, agentsv1beta1.ConditionReady)
		if pod == nil || ready == nil {
			continue
		}
		var podReadyAt time.Time
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				podReadyAt = c.LastTransitionTime.Time
			}
		}
		toPod = append(toPod, pod.CreationTimestamp.Sub(sb.CreationTimestamp.Time).Seconds())
		podReady = append(podReady, podReadyAt.Sub(pod.CreationTimestamp.Time).Seconds())
		toReady = append(toReady, ready.LastTransitionTime.Sub(podReadyAt).Seconds())
	}
	q := func(v []float64) string {
		if len(v) == 0 {
			return "-"
		}
		slices.Sort(v)
		return fmt.Sprintf("%.0f/%.0f/%.0f s", v[len(v)/2], v[len(v)*9/10], v[len(v)-1])
	}
	return fmt.Sprintf("Sandbox→Pod created %s, Pod created→Ready %s, Pod Ready→Sandbox Ready %s (median/p90/max)", q(toPod), q(podReady), q(toReady))
}

// floorDirect creates n Pods and n Services straight away with 50 workers and waits for every
// Pod to be Ready: what any controller has to wait for at least.
func floorDirect(b *testing.B, n int) (seconds, serverCPUSeconds float64) {
	ns := newNamespace(b)
	allReady := watchReady(b, ns, &corev1.PodList{}, n, func(o client.Object) bool {
		return len(o.(*corev1.Pod).Status.PodIPs) > 0
	})
	serverCPU := controlPlaneCPU(b)
	start := time.Now()
	creates := startParallel(50, n, func(i int) error {
		sb := sandbox(ns, fmt.Sprintf("sb-%05d", i), func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) })
		c, err := render.Sandbox(sb, render.Options{})
		if err != nil {
			return err
		}
		if err := admin.Create(context.Background(), c.Pod); err != nil {
			return err
		}
		return admin.Create(context.Background(), c.Service)
	})
	end := awaitReady(b, allReady, n, "Pods", creates)
	return end.Sub(start).Seconds(), controlPlaneCPU(b) - serverCPU
}

// floorRequired sends every write the benchmark's Sandboxes require, with no controller: 50
// workers each create a Sandbox and then the Pod and Service render.Sandbox makes of it, and once
// the simulated kubelet has a Pod Ready, 50 more write its Sandbox's Ready status, until every
// Sandbox is Ready. Beyond floorDirect it has the Sandboxes' own creates and status writes; what
// is left between it and the controller is the controller's cost: its watches, its decisions and
// its events. With asIssueAsks the Pod and Service are sent as the issue requires a controller
// to send them, by forced server-side apply under the controller's field manager, followed by
// the one event a writing pass records: what any controller held to those rules costs at least.
func floorRequired(b *testing.B, n int, asIssueAsks bool) (seconds, serverCPUSeconds float64) {
	ns := newNamespace(b)
	allReady := watchReady(b, ns, &agentsv1beta1.SandboxList{}, n, func(o client.Object) bool {
		c := findCondition(o.(*agentsv1beta1.Sandbox), agentsv1beta1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	podReady := make(chan *corev1.Pod, n)
	go eachPod(ctx, b, ns, func(p *corev1.Pod) bool { return len(p.Status.PodIPs) > 0 }, podReady)
	serverCPU := controlPlaneCPU(b)
	start := time.Now()
	creates := startParallel(50, n, func(i int) error {
		sb := sandbox(ns, fmt.Sprintf("sb-%05d", i), func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) })
		if err := admin.Create(ctx, sb); err != nil {
			return err
		}
		c, err := render.Sandbox(sb, render.Options{})
		if err != nil {
			return err
		}
		if !asIssueAsks {
			if err := admin.Create(ctx, c.Pod); err != nil {
				return err
			}
			return admin.Create(ctx, c.Service)
		}
		for _, child := range []client.Object{c.Pod, c.Service} {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(child)
			if err != nil {
				return err
			}
			delete(m, "status")
			unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
			if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: m}),
				client.FieldOwner(controller.FieldManager), client.ForceOwnership); err != nil {
				return err
			}
		}
		return admin.Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", sb.Name, time.Now().UnixNano()), Namespace: ns},
			EventTime:  metav1.NowMicro(), ReportingController: "sandbox-gitops", ReportingInstance: "floor",
			Action: "Apply", Reason: "Created", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind, Namespace: ns, Name: sb.Name, UID: sb.UID},
			Note:      fmt.Sprintf("Created Pod %q; Created Service %q", c.Pod.Name, c.Service.Name),
		})
	})
	statuses := startParallel(50, n, func(int) error {
		var pod *corev1.Pod
		select {
		case pod = <-podReady:
		case <-ctx.Done():
			return nil
		}
		sb := &agentsv1beta1.Sandbox{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod.Name}, sb); err != nil {
			return err
		}
		c, err := render.Sandbox(sb, render.Options{})
		if err != nil {
			return err
		}
		st := render.PlanSandbox(sb, render.SandboxFound{Pods: []*corev1.Pod{pod}, Service: c.Service}, metav1.Now(), render.Options{}).Status
		if st == nil {
			return fmt.Errorf("no status for Sandbox %s", sb.Name)
		}
		updated := sb.DeepCopy()
		updated.Status = *st
		return admin.Status().Patch(ctx, updated, client.MergeFrom(sb))
	})
	end := awaitReady(b, allReady, n, "Sandboxes", creates, statuses)
	return end.Sub(start).Seconds(), controlPlaneCPU(b) - serverCPU
}

// followNamespace lists the objects of list's kind in a namespace and watches them from there,
// handing each listed object and each watch event to seen (deleted: a deletion) until seen says
// it is done or ctx ends. A watch the API server closes (a busy test process reads too slowly) is
// listed and watched again; relisted, when set, is called first, so state kept from the previous
// list can be dropped. It returns how many times it listed again, and why it stopped early.
func followNamespace(ctx context.Context, ns string, list client.ObjectList, relisted func(), seen func(obj client.Object, deleted bool) (done bool)) (restarts int, err error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return 0, err
	}
	for ; ; restarts++ {
		if restarts > 0 && relisted != nil {
			relisted()
		}
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			return restarts, fmt.Errorf("listing %T: %w", list, err)
		}
		done := false
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			done = done || seen(o.(client.Object), false)
			return nil
		}); err != nil || done {
			return restarts, err
		}
		w, err := wc.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			return restarts, fmt.Errorf("watching %T: %w", list, err)
		}
		for ev := range w.ResultChan() {
			if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Error && ev.Type != watch.Bookmark && seen(obj, ev.Type == watch.Deleted) {
				w.Stop()
				return restarts, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return restarts, ctx.Err()
		}
	}
}

// eachPod sends each Pod of the namespace once, the first time ready says so, until ctx ends.
func eachPod(ctx context.Context, b *testing.B, ns string, ready func(*corev1.Pod) bool, out chan<- *corev1.Pod) {
	sent := map[string]bool{}
	_, err := followNamespace(ctx, ns, &corev1.PodList{}, nil, func(obj client.Object, deleted bool) bool {
		if p := obj.(*corev1.Pod); !deleted && !sent[p.Name] && ready(p) {
			sent[p.Name] = true
			out <- p
		}
		return false
	})
	if err != nil && ctx.Err() == nil {
		b.Errorf("following the Pods of %s: %v", ns, err)
	}
}

// watchReady watches the objects of a namespace and sends the time at which n of them are ready.
// Waiting by a watch costs the API server one stream; the list of all N objects every 100 ms it
// replaces took a share of the 2 cores from the very convergence it measured.
func watchReady(b *testing.B, ns string, list client.ObjectList, n int, ready func(client.Object) bool) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		defer close(out)
		readyNames := map[string]bool{}
		restarts, err := followNamespace(context.Background(), ns, list, func() { clear(readyNames) }, func(obj client.Object, deleted bool) bool {
			if !deleted && ready(obj) {
				readyNames[obj.GetName()] = true
			} else {
				delete(readyNames, obj.GetName())
			}
			return len(readyNames) == n
		})
		if restarts > 0 {
			b.Logf("the API server closed the watch of %T %d times (the test process read too slowly); each time it was listed and watched again", list, restarts)
		}
		if err != nil {
			b.Logf("%v", err)
			return
		}
		out <- time.Now()
	}()
	return out
}

// awaitReady waits until ready says n of what are ready and until every work channel (from
// startParallel) has answered, failing the benchmark on the first error any of them reports,
// without waiting for the rest.
func awaitReady(b *testing.B, ready <-chan time.Time, n int, what string, work ...<-chan error) time.Time {
	timeout := time.After(10 * time.Minute)
	errs := make(chan error, len(work))
	for _, w := range work {
		go func() { errs <- <-w }()
	}
	var at time.Time
	for returned := 0; at.IsZero() || returned < len(work); {
		select {
		case t, ok := <-ready:
			if !ok {
				b.Fatalf("the watch of %s ended before %d were ready", what, n)
			}
			at, ready = t, nil
		case err := <-errs:
			if err != nil {
				b.Fatal(err)
			}
			returned++
		case <-timeout:
			b.Fatalf("%d %s not ready, or their writers not returned, after 10 minutes", n, what)
		}
	}
	return at
}

// startParallel runs f for 0..n-1 on workers goroutines in the background: the channel gets
// the first error (or nil) once every call has returned. Benchmarks wait for it before they end
// the calls' context: a watch can show a write's effect before the writer has read the API
// server's answer, so "all Ready" does not mean every call has returned.
func startParallel(workers, n int, f func(i int) error) <-chan error {
	done := make(chan error, 1)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		done <- first
	}()
	return done
}

// requestCounts is apiserver_request_total by "resource[/subresource] VERB code", every verb.
func requestCounts(b *testing.B) benchkit.Counts {
	c, err := benchkit.Requests(context.Background(), env.Config)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// freeAddr is testenv.FreeAddr.
var freeAddr = testenv.FreeAddr

// profileAtPeak polls the process's resident set and saves a heap profile to path each time it
// reaches a new high, until the returned stop is called.
func profileAtPeak(b *testing.B, pid int, addr, path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var high float64
		for {
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			// Each profile costs the controller an allocation or two MiB: not at every step.
			if rss := currentRSSMiB(pid); rss > high+3 {
				high = rss
				saveHeapProfile(b, addr, path)
				if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
					_ = os.WriteFile(strings.TrimSuffix(path, ".pb.gz")+".status", status, 0o644)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func saveHeapProfile(b *testing.B, addr, path string) { saveProfile(b, addr, "heap", path) }

func saveProfile(b *testing.B, addr, profile, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		b.Logf("heap profile: %v", err)
	}
}

// currentRSSMiB is the process's resident set now (VmRSS), 0 if unreadable.
func currentRSSMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// controlPlaneCPU is the CPU time (user + system) kube-apiserver and etcd, children of this
// test process, have used so far.
func controlPlaneCPU(b *testing.B) float64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		name := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if ppid, _ := strconv.Atoi(fields[1]); ppid != os.Getpid() || (name != "kube-apiserver" && name != "etcd") {
			continue
		}
		ut, _ := strconv.ParseFloat(fields[11], 64)
		st, _ := strconv.ParseFloat(fields[12], 64)
		total += (ut + st) / 100
	}
	return total
}

// procStats reads a process's peak resident set (VmHWM) and CPU time (user + system).
func procStats(b *testing.B, pid int) (rssMiB, cpuSeconds float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			rssMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): utime is the 12th, stime the 13th.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return rssMiB, (ut + st) / 100 // USER_HZ is 100 on Linux
}

func buildController(b testing.TB) string {
	out := filepath.Join(b.TempDir(), "sandbox-controller")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sandbox-controller")
	cmd.Dir = testenv.RepoRoot()
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building sandbox-controller: %v\n%s", err, o)
	}
	return out
}

// writeKubeconfig writes cfg (a certificate user of the test API server) as a kubeconfig file.
func writeKubeconfig(b testing.TB, cfg *rest.Config) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["controller"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "controller"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}
