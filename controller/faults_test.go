package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/kubeletsim"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestDeletedChildRestored: a Service the Sandbox asks for, deleted by someone, comes back.
func TestDeletedChildRestored(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	svc := &corev1.Service{}
	if err := get(ns, "box", svc); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Service restored", func() error {
		s := &corev1.Service{}
		if err := get(ns, "box", s); err != nil {
			return err
		}
		if s.UID == svc.UID {
			return fmt.Errorf("still the old Service")
		}
		return nil
	})
}

// TestForeignManagerOverwriteRestored: another field manager changing fields the controller
// owns (a Pod label, a Service's selector and ports) takes them over; the next reconcile forces
// them back, because the controller's apply is forced and its extracted fields no longer match.
func TestForeignManagerOverwriteRestored(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)

	pod := &corev1.Pod{}
	if err := get(ns, "box", pod); err != nil {
		t.Fatal(err)
	}
	orig := pod.DeepCopy()
	pod.Labels["app"] = "hijacked"
	if err := admin.Patch(context.Background(), pod, client.MergeFrom(orig), client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := get(ns, "box", svc); err != nil {
		t.Fatal(err)
	}
	origSvc := svc.DeepCopy()
	svc.Spec.Ports[0].Port = 9999
	if err := admin.Patch(context.Background(), svc, client.MergeFrom(origSvc), client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the controller's fields restored", func() error {
		p := &corev1.Pod{}
		if err := get(ns, "box", p); err != nil {
			return err
		}
		s := &corev1.Service{}
		if err := get(ns, "box", s); err != nil {
			return err
		}
		if p.Labels["app"] != "agent" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8888 {
			return fmt.Errorf("pod label app=%q, service ports %+v", p.Labels["app"], s.Spec.Ports)
		}
		// The renumbered port could only be undone by replacing the spec; that leaves no second
		// entry of ours behind, which would keep every port it set owned forever.
		for _, e := range s.ManagedFields {
			if e.Manager == controller.FieldManager && e.Operation != metav1.ManagedFieldsOperationApply {
				return fmt.Errorf("the Service has a %s entry with operation %s", e.Manager, e.Operation)
			}
		}
		return nil
	})
}

// TestForeignChildNotTakenOver: an object of a child's name that someone else made (no
// name-hash label, so not in the controller's cache) is found by the controller's read from the
// API server before it creates, and is neither applied to nor adopted: the Sandbox reports it.
func TestForeignChildNotTakenOver(t *testing.T) {
	cases := map[string]struct {
		foreign client.Object
		want    string // in the Ready condition's message
	}{
		"Pod": {
			foreign: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "box", Labels: map[string]string{"team": "other"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
			want: `cannot adopt unowned pod "box"`,
		},
		"Service": {
			foreign: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "box", Labels: map[string]string{"team": "other"}},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"team": "other"}, Ports: []corev1.ServicePort{{Port: 80}}}},
			want: `cannot adopt unowned service "box"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			tc.foreign.SetNamespace(ns)
			create(t, tc.foreign)
			startController(t, ns, controller.Options{})
			create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
			sb := waitReady(t, ns, "box", metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError)
			if c := findCondition(sb, agentsv1beta1.ConditionReady); !strings.Contains(c.Message, tc.want) {
				t.Errorf("Ready message %q does not say %q", c.Message, tc.want)
			}
			got := tc.foreign.DeepCopyObject().(client.Object)
			if err := get(ns, "box", got); err != nil {
				t.Fatal(err)
			}
			if got.GetUID() != tc.foreign.GetUID() || appliedBy(got, controller.FieldManager) ||
				len(got.GetOwnerReferences()) > 0 || got.GetLabels()[agentsv1beta1.SandboxNameHashLabel] != "" {
				t.Errorf("the foreign %s was taken over: managers %v, owners %v, labels %v", name, managers(got), got.GetOwnerReferences(), got.GetLabels())
			}
		})
	}
}

// TestRestartWritesNothing: a controller started on a converged namespace sends zero write
// requests (counted by the API server) and creates no duplicates.
func TestRestartWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	stop := startController(t, ns, controller.Options{Render: render.Options{}})
	for i := range 5 {
		create(t, sandbox(ns, fmt.Sprintf("box-%d", i), func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.Service = ptr.To(i%2 == 0)
			if i == 4 {
				sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{
					EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "work"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}},
					},
				}}
			}
		}))
	}
	// Templates with the secure default and with custom rules whose ports name no protocol
	// (the API server defaults it).
	create(t, template(ns, "default-policy"))
	create(t, template(ns, "custom-policy", func(tpl *extv1beta1.SandboxTemplate) {
		tpl.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: intOrString(8888)}}}}}
	}))
	for i := range 5 {
		waitReady(t, ns, fmt.Sprintf("box-%d", i), metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	}
	for _, name := range []string{"default-policy", "custom-policy"} {
		eventually(t, time.Minute, "NetworkPolicy of "+name, func() error { return get(ns, name+"-network-policy", &networkingv1.NetworkPolicy{}) })
	}
	// Converged: a few seconds without writes first (the last status writes settle).
	settle(t, 15*time.Second)
	stop()

	before, passes, templatePasses := writeCounts(t), reconciles(t, "sandbox"), reconciles(t, "sandboxtemplate")
	startController(t, ns, controller.Options{})
	time.Sleep(3 * time.Second)
	if n, by := controllerWrites(before, writeCounts(t)); n != 0 {
		t.Errorf("a restarted controller wrote %v times on a converged namespace: %v", n, by)
	}
	// Zero writes count only if the restarted controller looked at everything.
	if ran, ranTemplates := reconciles(t, "sandbox")-passes, reconciles(t, "sandboxtemplate")-templatePasses; ran < 5 || ranTemplates < 2 {
		t.Errorf("the restarted controller ran %v passes over 5 Sandboxes and %v over 2 templates", ran, ranTemplates)
	}
	// No duplicates of any child.
	for _, c := range []struct {
		list client.ObjectList
		want int
	}{{&corev1.PodList{}, 5}, {&corev1.ServiceList{}, 3}, {&corev1.PersistentVolumeClaimList{}, 1}, {&networkingv1.NetworkPolicyList{}, 2}} {
		if err := admin.List(context.Background(), c.list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(c.list); n != c.want {
			t.Errorf("%d items in the %T, want %d", n, c.list, c.want)
		}
	}
}

// settle waits until the controller has made no write for two seconds.
func settle(t *testing.T, timeout time.Duration) {
	t.Helper()
	prev := writeCounts(t)
	eventually(t, timeout, "the controller to stop writing", func() error {
		time.Sleep(2 * time.Second)
		now := writeCounts(t)
		n, by := controllerWrites(prev, now)
		prev = now
		if n != 0 {
			return fmt.Errorf("%v", by)
		}
		return nil
	})
}

// TestConvergedPassWritesNothing: reconciles of a converged namespace (each Sandbox touched, so
// every one is reconciled again) send zero writes.
func TestConvergedPassWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	for i := range 3 {
		create(t, sandbox(ns, fmt.Sprintf("box-%d", i), func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	}
	for i := range 3 {
		waitReady(t, ns, fmt.Sprintf("box-%d", i), metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	}
	settle(t, 15*time.Second)
	before, passes := writeCounts(t), reconciles(t, "sandbox")
	// An annotation on the Sandbox is not rendered anywhere: every Sandbox is reconciled again
	// and nothing is to be written.
	for i := range 3 {
		sb := &agentsv1beta1.Sandbox{}
		if err := get(ns, fmt.Sprintf("box-%d", i), sb); err != nil {
			t.Fatal(err)
		}
		orig := sb.DeepCopy()
		sb.Annotations = map[string]string{"touched": "yes"}
		if err := admin.Patch(context.Background(), sb, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	after := writeCounts(t)
	n, by := controllerWrites(before, after)
	// The test's own three annotation patches are "sandboxes PATCH".
	by["sandboxes PATCH"] -= 3
	n -= 3
	if n != 0 {
		t.Errorf("reconciles of a converged namespace wrote: %v", by)
	}
	// Zero writes count only if the passes ran.
	if ran := reconciles(t, "sandbox") - passes; ran < 3 {
		t.Errorf("%v passes over the 3 touched Sandboxes", ran)
	}
}

// TestAPIServerRestart: the API server goes away mid-run and comes back; the controller
// converges on what changed meanwhile: a Pod deleted just before the outage is made again, and
// a Sandbox created after it gets its children. It has a control plane of its own, so the rest
// of the suite never sees the outage, with config/rbac installed and the controller running as
// its ServiceAccount, as everywhere in the suite.
func TestAPIServerRestart(t *testing.T) {
	own, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	own.ControlPlaneStopTimeout = 2 * time.Minute
	cfg, err := own.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := own.Stop(); err != nil {
			t.Errorf("stopping the second API server: %v", err)
		}
	}()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubelet, err := kubeletsim.Start(ctx, cfg, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Stop()
	asSA, err := installControllerIdentity(c, own)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(asSA, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: controller.CacheOptions(controller.Options{}), Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(ctx, mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	ready := func(name string) {
		t.Helper()
		eventually(t, 60*time.Second, name+" Ready", func() error {
			sb := &agentsv1beta1.Sandbox{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, sb); err != nil {
				return err
			}
			if cond := findCondition(sb, agentsv1beta1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("not Ready: %+v", cond)
			}
			return nil
		})
	}
	if err := c.Create(ctx, sandbox("default", "before")); err != nil {
		t.Fatal(err)
	}
	ready("before")
	first := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "before"}, first); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	// A crash, not a graceful shutdown (which waits a minute for long-running requests).
	apiServer := own.ControlPlane.GetAPIServer()
	killProcess(t, "kube-apiserver", "--secure-port="+apiServer.SecureServing.Port)
	if err := apiServer.Stop(); err != nil {
		t.Fatalf("cleaning up after kube-apiserver: %v", err)
	}
	time.Sleep(2 * time.Second)
	if err := own.StartAPIServerAgain(); err != nil { // same certificates and port
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	eventually(t, 60*time.Second, "the API server back", func() error {
		return c.Create(ctx, sandbox("default", "after", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	})
	eventually(t, 60*time.Second, "the deleted Pod made again", func() error {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "before"}, p); err != nil {
			return err
		}
		if p.UID == first.UID {
			return fmt.Errorf("still the Pod deleted before the outage (%s)", p.UID)
		}
		return nil
	})
	ready("before")
	ready("after")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "after"}, &corev1.Service{}); err != nil {
		t.Errorf("the Sandbox created after the outage has no Service: %v", err)
	}
}

// killProcess sends SIGKILL to the process whose command line holds name and arg.
func killProcess(t *testing.T, name, arg string) {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.Split(string(b), "\x00")
		if !strings.HasSuffix(cmdline[0], name) || !slices.Contains(cmdline, arg) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no %s process with %s", name, arg)
}

// TestForeignAdditionsRemoved: what another field manager adds to a child kept exactly as
// rendered (a rule opening a deny-all policy, a port appended to a Sandbox's Service) is its own,
// and no apply of ours removes it; the controller replaces the spec instead, leaves no second
// entry of its own behind, and then writes nothing more.
func TestForeignAdditionsRemoved(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "deny-all", func(t *extv1beta1.SandboxTemplate) { t.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{} }))
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	eventually(t, time.Minute, "the deny-all policy", func() error {
		return get(ns, render.NetworkPolicyName("deny-all"), &networkingv1.NetworkPolicy{})
	})

	intrude := func(obj map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(ns)
		if err := admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("intruder"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	intrude(map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": render.NetworkPolicyName("deny-all")},
		"spec":     map[string]any{"ingress": []any{map[string]any{}}},
	})
	intrude(map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "box"},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "extra", "port": int64(7777), "protocol": "TCP"}}},
	})

	ownEntries := func(o client.Object) error {
		for _, e := range o.GetManagedFields() {
			if e.Manager == controller.FieldManager && e.Operation != metav1.ManagedFieldsOperationApply {
				return fmt.Errorf("%s has a %s entry with operation %s", o.GetName(), e.Manager, e.Operation)
			}
		}
		return nil
	}
	eventually(t, time.Minute, "the intruder's additions removed", func() error {
		np := &networkingv1.NetworkPolicy{}
		if err := get(ns, render.NetworkPolicyName("deny-all"), np); err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 0 {
			return fmt.Errorf("the deny-all policy admits %+v", np.Spec.Ingress)
		}
		svc := &corev1.Service{}
		if err := get(ns, "box", svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8888 {
			return fmt.Errorf("service ports %+v", svc.Spec.Ports)
		}
		return errors.Join(ownEntries(np), ownEntries(svc))
	})

	// The take-back's events are sent after it, asynchronously; then nothing more may come.
	settle(t, 15*time.Second)
	before := writeCounts(t)
	time.Sleep(3 * time.Second)
	if n, by := controllerWrites(before, writeCounts(t)); n != 0 {
		t.Errorf("%v writes after the additions were removed: %v", n, by)
	}
}
