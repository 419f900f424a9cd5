package scale_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// Run modes of claimRun: the floor (no controller during the burst), ours, and upstream
// agent-sandbox's controller. Each is also the suffix of its run's namespace; ours keeps the
// name "controller" it always had, so that its namespaces and log lines read as before.
const (
	modeFloor    = "floor"
	modeOurs     = "controller"
	modeUpstream = "upstream"
)

// scaleController is a controller BenchmarkScaleClaims measures after the floor.
type scaleController struct {
	mode string
	// prefix is put before its metric names and report lines: none for ours, so that its figures
	// keep the names the README quotes.
	prefix string
}

// readScaleControllers reads SANDBOX_SCALE_CONTROLLERS: the controllers BenchmarkScaleClaims
// runs, in order, after the floor in the same cluster ("ours" by default; "ours,upstream" adds
// upstream agent-sandbox v1.0.1's controller, bin/agent-sandbox-controller).
func readScaleControllers(b *testing.B) []scaleController {
	known := map[string]scaleController{"ours": {mode: modeOurs}, "upstream": {mode: modeUpstream, prefix: "upstream-"}}
	v := os.Getenv("SANDBOX_SCALE_CONTROLLERS")
	if v == "" {
		v = "ours"
	}
	var out []scaleController
	var seen []string
	for _, name := range strings.Split(v, ",") {
		c, ok := known[name]
		if !ok || slices.Contains(seen, name) {
			// Each run has a namespace named after its mode: a controller twice would collide.
			b.Fatalf("SANDBOX_SCALE_CONTROLLERS=%q: want ours, upstream or both, comma-separated, each once", v)
		}
		seen = append(seen, name)
		out = append(out, c)
	}
	return out
}

// startFor starts the controller of a run's mode on ns: ours for the floor (which fills its pool
// with ours, then stops it) and for ours, upstream's for upstream.
func (e *scaleEnv) startFor(b *testing.B, ns, mode string) *controllerProc {
	if mode == modeUpstream {
		return e.startUpstream(b, ns)
	}
	return e.startController(b, ns)
}

// profileName is the file of a run's controller CPU profile; ours keeps the name it always had.
func profileName(scenario, mode string) string {
	if mode == modeUpstream {
		return scenario + "-upstream-burst.pb.gz"
	}
	return scenario + "-burst.pb.gz"
}

// startUpstream runs upstream agent-sandbox's controller (v1.0.1, built by hack/tools.sh) with
// the flags its kwok scalability test passes it (dev/ci/presubmits/test-e2e-scalability-kwok):
// the extension controllers (claims, templates, warm pools) on, 1,000 requests a second with a
// burst of 2,000, 50 Sandbox and 50 claim workers, one warm-pool and one template worker, warm
// pools created in batches of up to 300.
//
// Upstream's controller has no namespace flag: it watches and reconciles every namespace. So
// that it only ever sees its own run, the namespaces of the runs before it in this cluster are
// deleted first (see isolate), and it is stopped at the end of its run as ours is; ours, which
// watches only its own namespace, never runs while it does.
func (e *scaleEnv) startUpstream(b *testing.B, ns string) *controllerProc {
	b.Helper()
	bin := testenv.Tool(b, "agent-sandbox-controller")
	e.isolate(b, ns)
	metrics := testenv.FreeAddr(b)
	args := []string{"--kubeconfig", e.kubeconfig, "--extensions=true",
		"--kube-api-qps", "1000", "--kube-api-burst", "2000",
		"--sandbox-concurrent-workers", "50", "--sandbox-claim-concurrent-workers", "50",
		"--sandbox-warm-pool-concurrent-workers", "1", "--sandbox-template-concurrent-workers", "1",
		"--sandbox-warm-pool-max-batch-size", "300",
		// Upstream's test runs one replica with leader election in a namespace of its own; one
		// process here needs no lease (its writes are not counted as the controller's anyway),
		// and without one there is no wait for it at start.
		"--leader-elect=false",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "0", "--zap-log-level", logLevel()}
	var pprof string
	if os.Getenv("SANDBOX_SCALE_PROFILE") != "" {
		// Upstream serves /debug/pprof/profile on its metrics server.
		pprof = metrics
		args = append(args, "--enable-pprof")
	}
	cmd := niced(bin, args...)
	cmd.Stderr = os.Stderr
	if err := testenv.StartProcess(cmd); err != nil {
		b.Fatal(err)
	}
	p := &controllerProc{cmd: cmd, metrics: metrics, pprof: pprof}
	b.Cleanup(p.stop)
	return p
}

// isolate deletes every namespace but ns that holds agent-sandbox objects (the earlier runs' of
// this cluster, whose results are already taken) and waits until they are gone, so that a
// controller that watches the whole cluster starts with nothing to do outside ns: otherwise it
// would refill the floor's pool and reconcile ours' claims and Sandboxes inside its measured
// window. None of those objects has a finalizer; kube-controller-manager's namespace controller
// deletes them, and kwok the Pods.
func (e *scaleEnv) isolate(b *testing.B, ns string) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	var others []string
	for _, list := range []client.ObjectList{&agentsv1beta1.SandboxList{}, &extv1beta1.SandboxClaimList{},
		&extv1beta1.SandboxWarmPoolList{}, &extv1beta1.SandboxTemplateList{}} {
		if err := e.cl.List(ctx, list); err != nil {
			b.Fatal(err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			if n := o.(metav1.Object).GetNamespace(); n != ns && !slices.Contains(others, n) {
				others = append(others, n)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range others {
		if err := e.cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Minute)
	for _, n := range others {
		for {
			err := e.cl.Get(ctx, client.ObjectKey{Name: n}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("namespace %s not gone after 15 minutes (%v)", n, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if len(others) > 0 {
		say(b, "deleted namespaces %s before upstream's run in %v", strings.Join(others, ", "), time.Since(start).Round(100*time.Millisecond))
	}
}

// writeRoles sorts a run's writes (benchkit's "resource VERB" keys) for its report: which a
// controller makes, and which are a warm claim's critical path (the adoption of a pool member,
// the claim's Ready status).
type writeRoles struct {
	controller, critical func(key string) bool
	// refillCritical says the pool's refill creates share a key with the adoptions (ours creates
	// and adopts with APPLY), so they are taken off the critical count.
	refillCritical bool
}

// writeRolesOf gives each mode's roles. The floor sends ours' critical writes itself, so it is
// counted as ours. Upstream adopts a member with a merge patch on the member's resourceVersion
// (sandboxes PATCH: any other merge patch of a Sandbox counts too, so the figure is an upper
// bound) and patches the claim's status as ours does; it creates the
// refill's Sandboxes with POST, which ours never sends (only the floor's load generator creates
// claims with POST here), so those count as its writes and not as critical ones.
func writeRolesOf(mode string) writeRoles {
	if mode == modeUpstream {
		return writeRoles{
			controller: func(key string) bool { return key == "sandboxes POST" || controllerWrite(key) },
			critical:   func(key string) bool { return key == "sandboxes PATCH" || key == "sandboxclaims/status PATCH" },
		}
	}
	return writeRoles{controller: controllerWrite, critical: criticalWrite, refillCritical: true}
}
