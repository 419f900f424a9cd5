package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/benchkit"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/kubeletsim"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// The suite shares one real kube-apiserver and etcd (started in TestMain) and one simulated
// kubelet. Tests run one after another, each in its own namespace with its own controller, so
// the write counts read from the API server's metrics belong to the test that reads them.
var (
	env *testenv.Environment
	// admin is the test's own client (system:masters).
	admin client.Client
	// asController is the rest config of the controller's ServiceAccount, with exactly the RBAC
	// of config/rbac: every controller in this suite runs under it.
	asController *rest.Config
	scheme       = runtime.NewScheme()
	nsCounter    atomic.Int32
)

// kubeletWorkers is how many Pods the simulated kubelet works on at once. A cluster runs a
// kubelet per node, all reporting in parallel; with too few workers the simulator, not the
// controller, sets the pace of the benchmarks (at 8, a Pod of the 1,000-Sandbox benchmark waited
// 8 s on it, at 50 4 s). 50 is as many as the benchmarks' creators.
const kubeletWorkers = 50

// outcomeAnnotation on a Sandbox's pod template tells the simulated kubelet what to do with the
// Pod (Run by default).
const outcomeAnnotation = "sim.sandbox-gitops.dev/outcome"

func TestMain(m *testing.M) {
	level := zapcore.ErrorLevel
	if os.Getenv("CONTROLLER_TEST_LOG") != "" {
		level = zapcore.DebugLevel
	}
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme, renderv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	var err error
	if env, err = testenv.NewEnvironment(); err != nil {
		testenv.SkipMain(err)
	}
	cfg, err := env.Start() // stops what it started when it fails
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the API server: %v\n", err)
			}
		}()
		if err := setup(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "setting up the suite: %v\n", err)
			return 1
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		kubelet, err := kubeletsim.Start(ctx, cfg, kubeletWorkers, simulatedOutcome)
		if err != nil {
			fmt.Fprintf(os.Stderr, "starting the kubelet simulator: %v\n", err)
			return 1
		}
		defer kubelet.Stop()
		return m.Run()
	}()
	os.Exit(code)
}

func simulatedOutcome(p *corev1.Pod) kubeletsim.Outcome {
	switch p.Annotations[outcomeAnnotation] {
	case "Pending":
		return kubeletsim.Pending
	case "Succeed":
		return kubeletsim.Succeed
	case "Fail":
		return kubeletsim.Fail
	case "Unschedulable":
		return kubeletsim.Unschedulable
	case "PullBackOff":
		return kubeletsim.PullBackOff
	}
	return kubeletsim.Run
}

// setup makes the admin client and installs config/rbac, then provisions the controller's
// ServiceAccount identity as an envtest user.
func setup(cfg *rest.Config) error {
	var err error
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if asController, err = installControllerIdentity(admin, env); err != nil {
		return err
	}
	asController.QPS, asController.Burst = 500, 1000
	return nil
}

// installControllerIdentity installs config/rbac with c (an admin's client of e's API server)
// and returns the config of a user that is the controller's ServiceAccount, so that the
// controller runs there with exactly the permissions config/ grants.
func installControllerIdentity(c client.Client, e *testenv.Environment) (*rest.Config, error) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-gitops-system"}}
	if err := c.Create(ctx, ns); err != nil {
		return nil, err
	}
	objs, err := readManifests(filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %s %s from config/rbac: %w", o.GetKind(), o.GetName(), err)
		}
	}
	user, err := e.AddUser(envtest.User{
		Name:   "system:serviceaccount:sandbox-gitops-system:sandbox-gitops-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sandbox-gitops-system", "system:authenticated"},
	}, nil)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// readManifests reads every YAML file of a kustomization directory (the ones it lists).
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	kz, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, line := range strings.Split(string(kz), "\n") {
		name, ok := strings.CutPrefix(line, "- ")
		if !ok || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		objs, err := manifest.Parse(name, b)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(t.Name()))
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-")
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// startController runs the controller, as its ServiceAccount, on one namespace until the test
// ends (or the returned stop is called).
func startController(t testing.TB, ns string, opts controller.Options) (stop func()) {
	t.Helper()
	return startControllerIn(t, []string{ns}, opts)
}

// startControllerIn runs the controller on several namespaces.
func startControllerIn(t testing.TB, namespaces []string, opts controller.Options) (stop func()) {
	t.Helper()
	opts.Namespaces = namespaces
	mgr, err := ctrl.NewManager(asController, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controller.CacheOptions(opts),
		MapperProvider:         controller.NewRESTMapper,
		// Every test starts its own manager in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.Setup(ctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
	t.Cleanup(stop)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the controller's cache did not sync")
	}
	return stop
}

// eventually is testenv.Eventually.
var eventually = testenv.Eventually

// get reads an object with the admin client.
func get(ns, name string, obj client.Object) error {
	return admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
}

func notFound(ns, name string, obj client.Object) error {
	err := get(ns, name, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%T %s/%s still exists", obj, ns, name)
}

// readyCondition waits for the Sandbox's Ready condition to have the given status and reason.
func waitReady(t testing.TB, ns, name string, status metav1.ConditionStatus, reason string) *agentsv1beta1.Sandbox {
	t.Helper()
	sb := &agentsv1beta1.Sandbox{}
	eventually(t, time.Minute, fmt.Sprintf("Sandbox %s Ready=%s/%s", name, status, reason), func() error {
		if err := get(ns, name, sb); err != nil {
			return err
		}
		for _, c := range sb.Status.Conditions {
			if c.Type == agentsv1beta1.ConditionReady {
				if c.Status == status && c.Reason == reason {
					return nil
				}
				return fmt.Errorf("Ready=%s/%s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("no Ready condition yet")
	})
	return sb
}

// sandbox is a minimal valid Sandbox: one container listening on 8888.
func sandbox(ns, name string, mutate ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{
				ObjectMeta: agentsv1beta1.PodMetadata{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "python", Image: "python:3.12",
					Ports: []corev1.ContainerPort{{ContainerPort: 8888}},
				}}},
			},
		}},
	}
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := admin.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// writeCounts reads apiserver_request_total from the API server's /metrics and sums the
// write requests (create, update, patch, apply, delete) by "resource[/subresource] VERB".
func writeCounts(t testing.TB) map[string]float64 {
	t.Helper()
	w, err := benchkit.Writes(context.Background(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// controllerResources are the resources only the controller under test writes in a test: the
// test's own writes (creating Sandboxes, the kubelet's bindings and Pod statuses) and the API
// server's own (leases) are not counted. TestWriteCountsCoverRBAC keeps it covering every write
// config/rbac allows the controller.
var controllerResources = map[string]bool{
	"pods PATCH": true, "pods APPLY": true, "pods DELETE": true, "pods POST": true, "pods PUT": true,
	"services PATCH": true, "services APPLY": true, "services DELETE": true, "services POST": true, "services PUT": true,
	"persistentvolumeclaims PATCH": true, "persistentvolumeclaims APPLY": true, "persistentvolumeclaims POST": true,
	"networkpolicies PATCH": true, "networkpolicies APPLY": true, "networkpolicies DELETE": true, "networkpolicies POST": true,
	"sandboxes/status PATCH": true, "sandboxes/status PUT": true, "sandboxes/status APPLY": true, "sandboxes PATCH": true, "sandboxes DELETE": true,
	"sandboxes APPLY":            true,
	"sandboxclaims/status PATCH": true, "sandboxclaims/status APPLY": true, "sandboxclaims DELETE": true,
	"sandboxclaims PATCH": true, "sandboxclaims APPLY": true,
	"sandboxrenders/status PATCH": true, "sandboxrenders/status APPLY": true,
	"sandboxwarmpools/status PATCH": true, "sandboxwarmpools/status APPLY": true,
	"events POST": true, "events PATCH": true, "events APPLY": true,
}

// controllerWrites is the number of writes the controller made between two readings.
func controllerWrites(before, after map[string]float64) (total float64, by map[string]float64) {
	by, total = benchkit.Counts(after).Since(before, func(k string) bool { return controllerResources[k] })
	return total, by
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func intOrString(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }

// findEvent looks for an events.k8s.io Event about the named object with the given reason.
func findEvent(ns, regarding, reason string) error {
	list := &eventsv1.EventList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			return nil
		}
		seen = append(seen, e.Regarding.Name+"/"+e.Reason)
	}
	return fmt.Errorf("no %s event about %s among %v", reason, regarding, seen)
}
