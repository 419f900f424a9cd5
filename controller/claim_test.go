package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestClaimWarmAdoption: a claim of the Python SDK's shape adopts a Ready member of its pool, is
// Ready with status.sandbox.name at once, the member is relabelled as the claim's (owner, labels,
// pod metadata, Pod labels), the pool replaces it, and the claim is deleted at its shutdownTime.
func TestClaimWarmAdoption(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "python-pool", "python", 2))
	before := waitPoolReady(t, ns, "python-pool", 2)

	// The SDK's shutdownTime is an hour ahead; once the checks below are done it is moved to a
	// moment just ahead (no fixed lead outlasts them on a machine busy with other work).
	later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	claim := sandboxClaim(ns, "sdk-claim", "python-pool", func(c *extv1beta1.SandboxClaim) {
		c.Annotations = map[string]string{"agents.x-k8s.io/client-first-requested-at": time.Now().UTC().Format(time.RFC3339Nano)}
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &later, ShutdownPolicy: extv1beta1.ShutdownPolicyDelete}
	})
	create(t, claim)
	got := waitClaim(t, ns, "sdk-claim", metav1.ConditionTrue, "")
	name := got.Status.SandboxStatus.Name
	if name == "" || len(got.Status.SandboxStatus.PodIPs) == 0 {
		t.Fatalf("claim status has no Sandbox name or pod IPs: %+v", got.Status.SandboxStatus)
	}
	if name != before[0].Name && name != before[1].Name {
		t.Fatalf("claim got Sandbox %q, not one of the pool's members %q, %q", name, before[0].Name, before[1].Name)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := get(ns, name, sb); err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != extv1beta1.SandboxClaimKind || ref.UID != got.UID || len(sb.OwnerReferences) != 1 {
		t.Errorf("owner references of the adopted Sandbox: %+v", sb.OwnerReferences)
	}
	wantLabels := map[string]string{
		agentsv1beta1.SandboxLaunchTypeLabel:      agentsv1beta1.SandboxLaunchTypeWarm,
		extv1beta1.SandboxIDLabel:                 string(got.UID),
		agentsv1beta1.CreatedByLabel:              "python-client",
		agentsv1beta1.SandboxTemplateRefHashLabel: render.NameHash("python"),
	}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("labels of the adopted Sandbox (-want +got):\n%s", diff)
	}
	if _, ok := sb.Spec.PodTemplate.ObjectMeta.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]; ok {
		t.Errorf("the pool's safe-to-evict stayed on the adopted Sandbox's pod template")
	}
	eventually(t, time.Minute, "the adopted Sandbox's Pod relabelled", func() error {
		pod := &corev1.Pod{}
		if err := get(ns, name, pod); err != nil {
			return err
		}
		if _, ok := pod.Labels[agentsv1beta1.SandboxWarmPoolLabel]; ok {
			return fmt.Errorf("Pod still has the warm-pool label: %v", pod.Labels)
		}
		return nil
	})
	eventually(t, time.Minute, "the pool back to 2 Ready members", func() error {
		members, ready, err := poolMembers(ns, "python-pool")
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Name == name {
				return fmt.Errorf("the adopted Sandbox is still counted in the pool")
			}
		}
		if len(members) != 2 || ready != 2 {
			return fmt.Errorf("%d members, %d Ready", len(members), ready)
		}
		return nil
	})
	// Events wait behind the writes somebody waits on (the gate), and are sent asynchronously.
	eventually(t, time.Minute, "the SandboxAdopted event", func() error { return findEvent(ns, "sdk-claim", "SandboxAdopted") })
	shutdown := metav1.NewTime(time.Now().Add(2 * time.Second).Truncate(time.Second))
	updateClaim(t, ns, "sdk-claim", func(c *extv1beta1.SandboxClaim) { c.Spec.Lifecycle.ShutdownTime = &shutdown })
	eventually(t, time.Minute, "the claim deleted at its shutdownTime", func() error {
		return notFound(ns, "sdk-claim", &extv1beta1.SandboxClaim{})
	})
	if time.Now().Before(shutdown.Time) {
		t.Errorf("the claim was deleted before its shutdownTime %v", shutdown)
	}
}

// TestClaimColdStart: a claim with env skips the pool and gets a Sandbox of its own name that is
// exactly render.ClaimSandbox's (preview == reality for claims), and is Ready.
func TestClaimColdStart(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python", func(tp *extv1beta1.SandboxTemplate) {
		tp.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionPolicyAllowed
	}))
	create(t, warmPool(ns, "python-pool", "python", 1))
	waitPoolReady(t, ns, "python-pool", 1)
	create(t, sandboxClaim(ns, "with-env", "python-pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Env = []extv1beta1.EnvVar{{Name: "MODE", Value: ptr.To("agent")}}
		c.Spec.AdditionalPodMetadata.Labels = map[string]string{"sandbox.users.io/team": "a"}
	}))
	got := waitClaim(t, ns, "with-env", metav1.ConditionTrue, "")
	if got.Status.SandboxStatus.Name != "with-env" {
		t.Fatalf("status.sandbox.name = %q, want the claim's own name", got.Status.SandboxStatus.Name)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := get(ns, "with-env", sb); err != nil {
		t.Fatal(err)
	}
	stored := &extv1beta1.SandboxTemplate{}
	pool := &extv1beta1.SandboxWarmPool{}
	if err := get(ns, "python", stored); err != nil {
		t.Fatal(err)
	}
	if err := get(ns, "python-pool", pool); err != nil {
		t.Fatal(err)
	}
	want, cerr := render.ClaimSandbox(got, render.ClaimPool{Pool: pool, Template: stored}, render.Options{})
	if cerr != nil {
		t.Fatal(cerr)
	}
	if diff := cmp.Diff(want.Labels, sb.Labels); diff != "" {
		t.Errorf("labels (-render +cluster):\n%s", diff)
	}
	if diff := cmp.Diff(want.Annotations, sb.Annotations); diff != "" {
		t.Errorf("annotations (-render +cluster):\n%s", diff)
	}
	if !equality.Semantic.DeepEqual(want.OwnerReferences, sb.OwnerReferences) {
		t.Errorf("owner references: render %+v, cluster %+v", want.OwnerReferences, sb.OwnerReferences)
	}
	if diff := cmp.Diff(want.Spec.PodTemplate, sb.Spec.PodTemplate); diff != "" {
		t.Errorf("pod template (-render +cluster):\n%s", diff)
	}
	// Events wait behind the writes somebody waits on (the gate), and are sent asynchronously.
	eventually(t, time.Minute, "the SandboxProvisioned event", func() error { return findEvent(ns, "with-env", "SandboxProvisioned") })
	if members, _, _ := poolMembers(ns, "python-pool"); len(members) != 1 {
		t.Errorf("the pool has %d members, want its 1 untouched", len(members))
	}
}

// TestClaimMissingPoolAndTemplate: a claim on a pool that does not exist is Ready=False
// WarmPoolNotFound, then TemplateNotFound once the pool exists, and Ready once the template does:
// conditions, no crash, and no hot loop (no writes while it waits).
func TestClaimMissingPoolAndTemplate(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandboxClaim(ns, "early", "later-pool"))
	c := waitClaim(t, ns, "early", metav1.ConditionFalse, render.ReasonWarmPoolNotFound)
	if msg := readyMessage(c); msg != `SandboxWarmPool "later-pool" not found` {
		t.Errorf("message %q", msg)
	}
	// The status write's Warning event is sent after it, asynchronously: it belongs to the
	// write, not to the wait that follows.
	eventually(t, time.Minute, "the WarmPoolNotFound event", func() error { return findEvent(ns, "early", render.ReasonWarmPoolNotFound) })
	w0 := writeCounts(t)
	time.Sleep(2 * time.Second)
	if n, by := controllerWrites(w0, writeCounts(t)); n != 0 {
		t.Errorf("a waiting claim wrote %v times in 2 s: %v", n, by)
	}
	create(t, warmPool(ns, "later-pool", "later-template", 0))
	c = waitClaim(t, ns, "early", metav1.ConditionFalse, render.ReasonTemplateNotFound)
	if msg := readyMessage(c); msg != `SandboxTemplate "later-template" not found` {
		t.Errorf("message %q", msg)
	}
	create(t, template(ns, "later-template"))
	c = waitClaim(t, ns, "early", metav1.ConditionTrue, "")
	if c.Status.SandboxStatus.Name != "early" {
		t.Errorf("a pool of 0 gives a cold Sandbox named after the claim; got %q", c.Status.SandboxStatus.Name)
	}
}

func readyMessage(c *extv1beta1.SandboxClaim) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == agentsv1beta1.ConditionReady {
			return cond.Message
		}
	}
	return ""
}

// TestClaimAdoptsFirstCreatedMember: a claim adopts the member of its pool created first, as
// upstream's candidate queue (fed by its informer's add events) hands it out, when the members
// were created in one second out of the order of their ordinals, as parallel batches create
// them. The pool's own controller is off, so that the test creates the members, as the pool
// would, in the order it chooses: ordinals 2, 0, 1.
func TestClaimAdoptsFirstCreatedMember(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{Controllers: []string{"sandbox", "sandboxtemplate", "sandboxclaim", "sandboxrender"}})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "python-pool", "python", 3))
	tpl, pool := &extv1beta1.SandboxTemplate{}, &extv1beta1.SandboxWarmPool{}
	if err := get(ns, "python", tpl); err != nil {
		t.Fatal(err)
	}
	if err := get(ns, "python-pool", pool); err != nil {
		t.Fatal(err)
	}
	hashes, err := render.TemplateHashes(tpl)
	if err != nil {
		t.Fatal(err)
	}
	names := render.PoolMemberNames(ns, pool.Name, 3, nil)
	order := []string{names[2], names[0], names[1]}
	// Within one second, so that creationTimestamp cannot tell them apart: start just after a
	// second begins (three creates on a local API server take milliseconds).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	for _, name := range order { // applied as the pool's controller creates members
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(render.PoolSandbox(pool, tpl, name, hashes, render.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(controller.FieldManager)); err != nil {
			t.Fatalf("applying member %s: %v", name, err)
		}
	}
	var created []metav1.Time
	eventually(t, time.Minute, "the three members Ready", func() error {
		members, ready, err := poolMembers(ns, pool.Name)
		if err != nil {
			return err
		}
		if len(members) != 3 || ready != 3 {
			return fmt.Errorf("%d members, %d Ready", len(members), ready)
		}
		created = created[:0]
		for _, m := range members {
			created = append(created, m.CreationTimestamp)
		}
		return nil
	})
	if !created[0].Equal(&created[1]) || !created[1].Equal(&created[2]) {
		t.Fatalf("the members were created in different seconds (%v): creationTimestamp orders them, and the test proves nothing", created)
	}
	create(t, sandboxClaim(ns, "first", pool.Name))
	got := waitClaim(t, ns, "first", metav1.ConditionTrue, "")
	if got.Status.SandboxStatus.Name != order[0] {
		t.Errorf("the claim adopted %q; the first member created is %q (created in the order %v; ordinals %v)",
			got.Status.SandboxStatus.Name, order[0], order, names)
	}
}
