package controller_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/internal/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// BenchmarkConverge measures what issue "Controller, part 1" targets, on the real API server
// with the simulated kubelet: N Sandboxes (one container, port 8888, service: true) created
// together by 50 workers, until all are Ready. The controller runs as its own process (the
// binary of cmd/sandbox-controller, as its ServiceAccount) so its peak RSS and CPU time are its
// own. Writes are the API server's apiserver_request_total for what the controller writes
// (Pods, Services, Sandbox status, events), per Sandbox. The floor, in the same run: the same
// Pods and Services created directly by 50 workers, until all Pods are Ready.
//
// Run with `make bench` (or `go test -run '^$' -bench Converge ./controller/`); one iteration
// per size; SANDBOX_BENCH_SIZES overrides the sizes (default 1000,2000,4000) and
// SANDBOX_BENCH_STEADY the window after convergence in which writes must be zero (default 60s).
// SANDBOX_BENCH_PROFILE=DIR writes the controller's heap profiles there: heap-N-peak.pb.gz,
// taken when its resident set last grew (with its /proc status), heap-N-end.pb.gz, once all are
// Ready (read them with `go tool pprof -sample_index=inuse_space`), and gctrace-N.txt, the
// controller's standard error under GODEBUG=gctrace=1.
func BenchmarkConverge(b *testing.B) {
	bin := buildController(b)
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
				floor := floorDirect(b, n)
				r := convergeOnce(b, bin, kubeconfig, n, steady)
				b.ReportMetric(r.seconds, "s-to-ready")
				b.ReportMetric(floor, "s-floor")
				b.ReportMetric(r.seconds/floor, "x-floor")
				b.ReportMetric(r.writes/float64(n), "writes/sandbox")
				b.ReportMetric(r.writesNoEvents/float64(n), "writes-excl-events/sandbox")
				b.ReportMetric(r.steadyWrites, "writes-after")
				b.ReportMetric(r.peakRSSMiB, "MiB-peak-rss")
				b.ReportMetric(r.cpuSeconds, "s-cpu")
				b.Logf("n=%d: ready in %.1fs (floor %.1fs), writes by kind %v", n, r.seconds, floor, r.byKind)
			}
		})
	}
}

type convergeResult struct {
	seconds, writes, writesNoEvents, steadyWrites, peakRSSMiB, cpuSeconds float64
	byKind                                                                map[string]float64
}

func convergeOnce(b *testing.B, bin, kubeconfig string, n int, steady time.Duration) convergeResult {
	ns := newNamespace(b)
	args := []string{"--kubeconfig", kubeconfig, "--namespaces", ns,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--zap-log-level", "error"}
	profileDir := os.Getenv("SANDBOX_BENCH_PROFILE")
	pprofAddr := ""
	if profileDir != "" {
		pprofAddr = freeAddr(b)
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
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(2 * time.Second) // the controller's caches sync
	if profileDir != "" {
		stop := profileAtPeak(b, cmd.Process.Pid, pprofAddr, filepath.Join(profileDir, fmt.Sprintf("heap-%d-peak.pb.gz", n)))
		defer func() {
			stop()
			saveHeapProfile(b, pprofAddr, filepath.Join(profileDir, fmt.Sprintf("heap-%d-end.pb.gz", n)))
		}()
	}

	before := writeCounts(b)
	start := time.Now()
	parallelDo(50, n, func(i int) error {
		return admin.Create(context.Background(), sandbox(ns, fmt.Sprintf("sb-%05d", i), func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.Service = ptr.To(true)
		}))
	})
	for {
		list := &agentsv1beta1.SandboxList{}
		if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for i := range list.Items {
			if c := findCondition(&list.Items[i], agentsv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("%d of %d Ready after 10 minutes", ready, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := convergeResult{seconds: time.Since(start).Seconds()}
	// Writes still in flight when the last status lands (events are sent asynchronously) are
	// part of converging; wait for the API server to see them.
	time.Sleep(2 * time.Second)
	mid := writeCounts(b)
	r.writes, r.byKind = controllerWrites(before, mid)
	r.writesNoEvents = r.writes - r.byKind["events POST"] - r.byKind["events PATCH"]
	time.Sleep(steady)
	r.steadyWrites, _ = controllerWrites(mid, writeCounts(b))
	r.peakRSSMiB, r.cpuSeconds = procStats(b, cmd.Process.Pid)
	return r
}

// floorDirect creates n Pods and n Services straight away with 50 workers and waits for every
// Pod to be Ready: what any controller has to wait for at least.
func floorDirect(b *testing.B, n int) float64 {
	ns := newNamespace(b)
	start := time.Now()
	parallelDo(50, n, func(i int) error {
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
	for {
		pods := &corev1.PodList{}
		if err := admin.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, p := range pods.Items {
			if len(p.Status.PodIPs) > 0 {
				ready++
			}
		}
		if ready == n {
			return time.Since(start).Seconds()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func parallelDo(workers, n int, f func(i int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
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
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		panic(first)
	}
}

// freeAddr is a loopback address with a port nobody listens on.
func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

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

func saveHeapProfile(b *testing.B, addr, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
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

func buildController(b *testing.B) string {
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
