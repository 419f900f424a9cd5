package scale_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/benchkit"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/loadgen"
)

// BenchmarkScaleConverge converges 1,000, 2,000, 5,000 and 10,000 Sandboxes, each size in a
// fresh cluster of 100 kwok Nodes at upstream's scale-test limits: the Sandboxes (one container,
// port 8888, a Service) are created by 50 clients as fast as the API server takes them, and the
// run ends when every one is Ready. It reports the wall time, the controller's writes per
// Sandbox (on the API server), its peak and settled resident set and its CPU; the growth per
// extra 1,000 is read off the table. At the largest size the controller is then killed and
// started again: the new process's first pass over every Sandbox must send no write, and the
// time until it is done is reported.
//
// SANDBOX_SCALE_SIZES overrides the sizes (comma-separated), SANDBOX_SCALE_NODES the Nodes.
func BenchmarkScaleConverge(b *testing.B) {
	sizes := []int{1000, 2000, 5000, 10000}
	if v := os.Getenv("SANDBOX_SCALE_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("SANDBOX_SCALE_SIZES=%q: want whole numbers, at least 1", v)
			}
			sizes = append(sizes, n)
		}
	}
	nodes := readClaimParams(b).nodes
	largest := 0
	for _, n := range sizes {
		largest = max(largest, n)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("sandboxes=%d", n), func(b *testing.B) {
			for range b.N {
				e := startEnv(b, nodes)
				r := e.converge(b, n, n == largest)
				r.report(b, n)
			}
		})
	}
}

type convergeResult struct {
	wall       time.Duration
	writes     benchkit.Counts
	peakRSS    float64
	settledRSS float64
	cpu        map[string]time.Duration
	cpuShares  string
	// restart is the time from the new process's start until its first pass over every
	// Sandbox is done, restartWrites what it wrote meanwhile (zero when there was no restart).
	restart       time.Duration
	restartWrites benchkit.Counts
	restarted     bool
}

func (r convergeResult) report(b *testing.B, n int) {
	_, all := r.writes.Since(nil, controllerWrite)
	b.ReportMetric(r.wall.Seconds(), "s-to-ready")
	b.ReportMetric(all/float64(n), "writes/sandbox")
	b.ReportMetric(r.writes["events POST"]/float64(n), "events/sandbox")
	b.ReportMetric(r.peakRSS, "MiB-peak-rss")
	b.ReportMetric(r.settledRSS, "MiB-settled-rss")
	b.ReportMetric(r.cpu["controller"].Seconds(), "s-cpu-controller")
	b.ReportMetric(r.cpu["kube-apiserver"].Seconds(), "s-cpu-apiserver")
	b.ReportMetric(r.cpu["etcd"].Seconds(), "s-cpu-etcd")
	say(b, "n=%d: Ready in %v; controller writes %.2f per Sandbox (events %.2f, the scheduler's included); controller RSS peak %.1f MiB, settled %.1f MiB; CPU: %s; writes %v",
		n, r.wall.Round(100*time.Millisecond), all/float64(n), r.writes["events POST"]/float64(n), r.peakRSS, r.settledRSS, r.cpuShares, r.writes)
	if r.restarted {
		_, w := r.restartWrites.Since(nil, nil)
		b.ReportMetric(r.restart.Seconds(), "s-restart-first-pass")
		b.ReportMetric(w, "restart-writes")
		say(b, "n=%d: after a restart, the first pass over every Sandbox took %v and wrote %v", n, r.restart.Round(100*time.Millisecond), r.restartWrites)
	}
}

// convergeSandbox is the converge benchmark's Sandbox: one container, port 8888, a Service.
func convergeSandbox(ns string, i int) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sandbox-%05d", i), Namespace: ns}}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "agent", Image: "python:3.12", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}
	sb.Spec.Service = ptr.To(true)
	return sb
}

// converge creates n Sandboxes in a namespace of their own with the controller running, waits
// until every one is Ready, and with restart kills the controller and measures the new
// process's first pass.
func (e *scaleEnv) converge(b *testing.B, n int, restart bool) convergeResult {
	ctx := context.Background()
	ns := e.newNamespace(b, "converge")
	ctl := e.startController(b, ns)
	time.Sleep(2 * time.Second) // its caches sync
	ready := e.watchSandboxesReady(b, ns)
	writesBefore, err := benchkit.Writes(ctx, e.cfg)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore := benchkit.CPU(e.pids(ctl))
	start := time.Now()
	// As fast as the API server takes them: a rate no client reaches.
	res, err := loadgen.Run(ctx, loadgen.Options{Rate: 1e6, N: n, Workers: 50}, func(ctx context.Context, i int) error {
		return e.cl.Create(ctx, convergeSandbox(ns, i))
	})
	if err != nil {
		b.Fatal(err)
	}
	if f := res.Failed(); f > 0 {
		b.Fatalf("%d creates failed: %v", f, res.Errors())
	}
	ready.await(b, n, 30*time.Minute)
	var r convergeResult
	r.wall = time.Since(start)
	time.Sleep(2 * time.Second) // events are sent asynchronously
	writesAfter, err := benchkit.Writes(ctx, e.cfg)
	if err != nil {
		b.Fatal(err)
	}
	r.writes, _ = writesAfter.Since(writesBefore, nil)
	cpuAfter := benchkit.CPU(e.pids(ctl))
	r.cpu = cpuSpent(cpuBefore, cpuAfter)
	r.cpuShares = cpuShare(r.cpu, r.wall)
	time.Sleep(10 * time.Second) // what the resident set settles to once the work is done
	if ps, err := benchkit.ReadProcess(ctl.cmd.Process.Pid); err == nil {
		r.peakRSS, r.settledRSS = ps.PeakRSSMiB, ps.RSSMiB
	}
	if restart {
		ctl.stop()
		before, err := benchkit.Writes(ctx, e.cfg)
		if err != nil {
			b.Fatal(err)
		}
		restarted := time.Now()
		ctl = e.startController(b, ns)
		ctl.awaitPasses(b, "sandbox", n, 15*time.Minute)
		r.restart, r.restarted = time.Since(restarted), true
		time.Sleep(2 * time.Second)
		after, err := benchkit.Writes(ctx, e.cfg)
		if err != nil {
			b.Fatal(err)
		}
		r.restartWrites, _ = after.Since(before, func(k string) bool { return controllerWrite(k) || strings.HasPrefix(k, "events ") })
	}
	return r
}

// awaitPasses waits until reconciler name has run passes successful passes and its queue is
// empty, reading the controller's /metrics.
func (p *controllerProc) awaitPasses(b *testing.B, name string, passes int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		done, depth := p.passes(name)
		if done >= float64(passes) && depth == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %.0f of %d passes after %v (queue %v)", name, done, passes, timeout, depth)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// passes reads the controller's successful passes of reconciler name and its queue's depth.
func (p *controllerProc) passes(name string) (done, depth float64) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, -1
	}
	depth = -1
	for _, line := range strings.Split(string(body), "\n") {
		value := func() float64 {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, " ")+1:]), 64)
			return v
		}
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, `controller="`+name+`"`) && strings.Contains(line, `result="success"`):
			done += value()
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, `controller="`+name+`"`) && strings.Contains(line, `result="requeue_after"`):
			done += value()
		case strings.HasPrefix(line, "workqueue_depth{") && strings.Contains(line, `name="`+name+`"`):
			depth = value()
		}
	}
	return done, depth
}

// sandboxWatch counts the Sandboxes of a namespace seen Ready, relisting when the API server
// ends the watch.
type sandboxWatch struct {
	mu     sync.Mutex
	ready  map[string]bool
	notify chan struct{}
}

func (e *scaleEnv) watchSandboxesReady(b *testing.B, ns string) *sandboxWatch {
	w := &sandboxWatch{ready: map[string]bool{}, notify: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	seen := func(sb *agentsv1beta1.Sandbox) {
		if !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			return
		}
		w.mu.Lock()
		if !w.ready[sb.Name] {
			w.ready[sb.Name] = true
			select {
			case w.notify <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
	}
	go func() {
		for ctx.Err() == nil {
			list := &agentsv1beta1.SandboxList{}
			if err := e.cl.List(ctx, list, client.InNamespace(ns)); err != nil {
				time.Sleep(time.Second)
				continue
			}
			for i := range list.Items {
				seen(&list.Items[i])
			}
			wi, err := e.cl.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range wi.ResultChan() {
				if sb, ok := ev.Object.(*agentsv1beta1.Sandbox); ok && ev.Type != watch.Deleted {
					seen(sb)
				}
			}
		}
	}()
	return w
}

func (w *sandboxWatch) await(b *testing.B, n int, timeout time.Duration) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		count := len(w.ready)
		w.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-w.notify:
		case <-time.After(time.Second):
		case <-deadline:
			b.Fatalf("%d of %d Sandboxes Ready after %v", count, n, timeout)
		}
	}
}
