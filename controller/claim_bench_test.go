package controller_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// BenchmarkClaims measures what issue "Controller, part 2" targets, as upstream measured it: 50
// claims created at once by 50 workers, on the real API server with the simulated kubelet, the
// controller as its own process. Latency is from just before a claim's create call to the watch
// event that shows it Ready (p50 and p99 of the 50). Writes are the API server's
// apiserver_request_total for what the controller writes, per claim.
//
//   - warm-floor: the warm critical path's writes sent by the benchmark itself with no controller
//     (see adoptDirectly): what the API server alone costs, in the same run.
//   - warm: against a pool of 50 Ready members, with the pool reconciler off during the burst, so
//     every write counted is a claim's (critical path: the adoption apply and the claim's status;
//     the Pod's metadata re-sync and the events come after Ready).
//   - warm+refill: the same burst with every reconciler on; also the time until the pool has 50
//     Ready members again, from the burst's start and from the last claim's Ready.
//   - cold: against a pool of 0 (every claim starts cold); all its writes are on its path.
//   - warm+annotations, cold+annotations: warm and cold with --upstream-annotations, to count
//     what upstream's annotations cost per claim.
//
// Run with `make bench` (or `go test -run '^$' -bench Claims ./controller/`); SANDBOX_BENCH_CLAIMS
// sets the number of claims (and members), 50 by default. The CRDs convert as envtest's default
// installs them (see convertAsEnvtest); SANDBOX_BENCH_PROFILE=DIR saves a 2 s
// CPU profile of the controller during each burst; SANDBOX_BENCH_APISERVER_PROFILE=FILE
// saves a 2 s CPU profile of kube-apiserver taken during the burst.
func BenchmarkClaims(b *testing.B) {
	convertAsEnvtest(b)
	bin := buildController(b)
	kubeconfig := writeKubeconfig(b, asController)
	n := 50
	if v := os.Getenv("SANDBOX_BENCH_CLAIMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SANDBOX_BENCH_CLAIMS=%q: want a number of claims, at least 1", v)
		}
	}
	// SANDBOX_BENCH_PROFILE=DIR: a 2 s CPU profile of the controller during each burst,
	// cpu-claims-MODE.pb.gz.
	profileDir := os.Getenv("SANDBOX_BENCH_PROFILE")
	var pprofAddr string
	var profileArgs []string
	if profileDir != "" {
		pprofAddr = freeAddr(b)
		profileArgs = []string{"--pprof-bind-address", pprofAddr}
	}
	for _, mode := range []string{"warm-floor", "warm", "warm+refill", "cold", "warm+annotations", "cold+annotations"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				ns := newNamespace(b)
				create(b, template(ns, "python"))
				replicas := int32(n)
				if strings.HasPrefix(mode, "cold") {
					replicas = 0
				}
				create(b, warmPool(ns, "pool", "python", replicas))
				if replicas > 0 {
					stop := startControllerProcess(b, bin, kubeconfig, ns)
					waitPoolReady(b, ns, "pool", n)
					stop()
				}
				if mode == "warm-floor" {
					r := claimBurstWith(b, ns, "pool", n, false, "", "", adoptDirectly(b, ns))
					b.ReportMetric(r.p50.Seconds()*1000, "ms-p50")
					b.ReportMetric(r.p99.Seconds()*1000, "ms-p99")
					b.Logf("%s: p50 %v, p99 %v, writes by kind %v", mode, r.p50, r.p99, r.byKind)
					continue
				}
				var stop func()
				args := slices.Clone(profileArgs)
				if strings.HasSuffix(mode, "+annotations") {
					args = append(args, "--upstream-annotations")
				}
				if mode == "warm" || mode == "warm+annotations" {
					args = append(args, "--controllers", "sandbox,sandboxtemplate,sandboxclaim")
				}
				stop = startControllerProcess(b, bin, kubeconfig, ns, args...)
				r := claimBurst(b, ns, "pool", n, mode == "warm+refill", pprofAddr, strings.ReplaceAll(mode, "+", "-"))
				stop()
				b.ReportMetric(r.p50.Seconds()*1000, "ms-p50")
				b.ReportMetric(r.p99.Seconds()*1000, "ms-p99")
				b.ReportMetric(r.writes/float64(n), "writes/claim")
				if mode == "warm" || mode == "warm+annotations" {
					b.ReportMetric((r.byKind["sandboxes APPLY"]+r.byKind["sandboxclaims/status PATCH"])/float64(n), "critical-path-writes/claim")
				}
				if strings.HasSuffix(mode, "+annotations") {
					// Upstream's annotations: the claims' (one apply, or two when Ready comes in
					// a later pass) and the Sandboxes' pod-name (a pool member's is paid when it
					// warms up; the members here warmed up without the switch).
					b.ReportMetric((r.byKind["sandboxclaims APPLY"]+r.byKind["sandboxclaims PATCH"])/float64(n), "annotation-writes/claim")
				}
				if r.refill > 0 {
					b.ReportMetric(r.refill.Seconds(), "s-pool-refill")
					b.ReportMetric(r.refillAfter.Seconds(), "s-pool-refill-after-burst")
				}
				b.Logf("%s: p50 %v, p99 %v, writes by kind %v, pool refilled in %v", mode, r.p50, r.p99, r.byKind, r.refill)
			}
		})
	}
}

type burstResult struct {
	p50, p99, refill time.Duration
	// refillAfter is the refill counted from the last claim's Ready instead of the burst's start.
	refillAfter time.Duration
	writes      float64
	byKind      map[string]float64
}

// claimBurst creates n claims at once and waits, through a watch, for each to be Ready.
// With pprofAddr set, a 2 s CPU profile of the controller is saved to $SANDBOX_BENCH_PROFILE.
func claimBurst(b *testing.B, ns, pool string, n int, refill bool, pprofAddr, mode string) burstResult {
	return claimBurstWith(b, ns, pool, n, refill, pprofAddr, mode, nil)
}

// claimBurstWith is claimBurst with then run by the same worker right after each claim's
// create call (the floor's own writes).
func claimBurstWith(b *testing.B, ns, pool string, n int, refill bool, pprofAddr, mode string, then func(i int, claim *extv1beta1.SandboxClaim) error) burstResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := wc.Watch(ctx, &extv1beta1.SandboxClaimList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	if path := os.Getenv("SANDBOX_BENCH_APISERVER_PROFILE"); path != "" {
		// A CPU profile of the API server during the burst, to see where its time goes.
		go func() {
			cs, err := kubernetes.NewForConfig(env.Config)
			if err != nil {
				return
			}
			body, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "2").DoRaw(context.Background())
			if err == nil {
				_ = os.WriteFile(path, body, 0o644)
			}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	if pprofAddr != "" {
		go saveProfile(b, pprofAddr, "profile?seconds=2", filepath.Join(os.Getenv("SANDBOX_BENCH_PROFILE"), "cpu-claims-"+mode+".pb.gz"))
		time.Sleep(100 * time.Millisecond)
	}
	var mu sync.Mutex
	created := map[string]time.Time{}
	before := writeCounts(b)
	start := time.Now()
	creates := startParallel(50, n, func(i int) error {
		name := fmt.Sprintf("claim-%02d", i)
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		claim := sandboxClaim(ns, name, pool)
		if err := admin.Create(ctx, claim); err != nil || then == nil {
			return err
		}
		return then(i, claim)
	})
	var latencies, toAdded []time.Duration
	var lastReady time.Time
	seen, added := map[string]bool{}, map[string]bool{}
	for len(latencies) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch of claims ended")
			}
			c, isClaim := ev.Object.(*extv1beta1.SandboxClaim)
			if !isClaim || ev.Type == watch.Deleted || seen[c.Name] {
				continue
			}
			if !added[c.Name] {
				added[c.Name] = true
				mu.Lock()
				toAdded = append(toAdded, time.Since(created[c.Name]))
				mu.Unlock()
			}
			if meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady) && c.Status.SandboxStatus.Name != "" {
				at := time.Now()
				lastReady = at
				seen[c.Name] = true
				mu.Lock()
				latencies = append(latencies, at.Sub(created[c.Name]))
				mu.Unlock()
			}
		case err := <-creates:
			if err != nil {
				b.Fatal(err)
			}
			creates = nil
		case <-ctx.Done():
			b.Fatalf("%d of %d claims Ready after 5 minutes", len(latencies), n)
		}
	}
	if creates != nil {
		// Every claim is Ready, but a writer may not have read its last answer yet: wait for it
		// before the deferred cancel ends the calls' context.
		if err := <-creates; err != nil {
			b.Fatal(err)
		}
	}
	var r burstResult
	if refill {
		for {
			if _, ready, err := poolMembers(ns, pool); err == nil && ready == n {
				r.refill = time.Since(start)
				r.refillAfter = time.Since(lastReady)
				break
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatal("the pool was not full again after 2 minutes")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Events are sent asynchronously: let the API server see them.
	time.Sleep(2 * time.Second)
	r.writes, r.byKind = controllerWrites(before, writeCounts(b))
	slices.Sort(latencies)
	slices.Sort(toAdded)
	b.Logf("from the create call to the claim's first watch event: p50 %v, max %v", toAdded[len(toAdded)/2], toAdded[len(toAdded)-1])
	r.p50 = latencies[len(latencies)/2-1+len(latencies)%2]
	r.p99 = latencies[(len(latencies)*99+99)/100-1]
	return r
}

// startControllerProcess runs the controller binary on one namespace until stop is called.
func startControllerProcess(b *testing.B, bin, kubeconfig, ns string, extra ...string) (stop func()) {
	args := append([]string{"--kubeconfig", kubeconfig, "--namespaces", ns,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--enable-webhook=false", "--zap-log-level", benchLogLevel(), "--zap-time-encoding", "rfc3339nano"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := testenv.StartProcess(cmd); err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	b.Cleanup(stop)
	time.Sleep(2 * time.Second) // the controller's caches sync
	return stop
}

// benchLogLevel is the controller's log level in benchmarks: error, or SANDBOX_BENCH_LOG.
func benchLogLevel() string {
	if l := os.Getenv("SANDBOX_BENCH_LOG"); l != "" {
		return l
	}
	return "error"
}

// adoptDirectly is the floor of a warm claim: what the controller's critical path writes (the
// adoption apply on the member's resourceVersion, then the claim's Ready status), sent by the
// worker that created the claim, as the controller's identity, with every decision made in
// advance (member i for claim i). No controller runs: this is what the API server alone costs.
func adoptDirectly(b *testing.B, ns string) func(int, *extv1beta1.SandboxClaim) error {
	c, err := client.New(asController, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	members, _, err := poolMembers(ns, "pool")
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(members, func(x, y agentsv1beta1.Sandbox) int { return strings.Compare(x.Name, y.Name) })
	tpl := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "python", tpl); err != nil {
		b.Fatal(err)
	}
	return func(i int, claim *extv1beta1.SandboxClaim) error {
		ctx := context.Background()
		member := &members[i]
		intent, cerr := render.AdoptWarmSandbox(member, claim, tpl)
		if cerr != nil {
			return cerr
		}
		adopt := render.Step{Action: render.ActionAdopt, Kind: agentsv1beta1.SandboxKind, Name: intent.Name,
			Intent: &render.Intent{Object: intent}, Precondition: &render.Precondition{ResourceVersion: member.ResourceVersion}}
		if err := controller.SendStep(ctx, c, ns, adopt); err != nil {
			return err
		}
		updated := claim.DeepCopy()
		updated.Status = render.ClaimStatus(claim, render.ClaimStatusInputs{Sandbox: intent}, metav1.Now())
		return c.Status().Patch(ctx, updated, client.MergeFromWithOptions(claim, client.MergeFromWithOptimisticLock{}))
	}
}
