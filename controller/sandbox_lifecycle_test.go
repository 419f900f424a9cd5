package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestSandboxBecomesReady: a Sandbox gets its Pod and Service through server-side apply under the
// controller's field manager, with the Sandbox as controller owner (real UID), and reaches
// Ready=True with the Pod's IP, node and the Service in its status.
func TestSandboxBecomesReady(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))

	sb := waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	if c := findCondition(sb, agentsv1beta1.ConditionReady); c.Message != "Pod is Ready; Service Exists" {
		t.Errorf("Ready message %q, want %q", c.Message, "Pod is Ready; Service Exists")
	}
	if len(sb.Status.PodIPs) != 1 || sb.Status.NodeName == "" || sb.Status.Service != "box" ||
		sb.Status.ServiceFQDN != "box."+ns+".svc.cluster.local" || sb.Status.LabelSelector != agentsv1beta1.SandboxNameHashLabel+"="+render.NameHash("box") {
		t.Errorf("status %+v lacks the Pod's IP, node, Service or selector", sb.Status)
	}
	pod := &corev1.Pod{}
	if err := get(ns, "box", pod); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := get(ns, "box", svc); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{pod, svc} {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.UID != sb.UID || ref.Kind != "Sandbox" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("%T owner reference %+v, want the Sandbox (UID %s) as blocking controller", o, ref, sb.UID)
		}
		if !appliedBy(o, controller.FieldManager) {
			t.Errorf("%T managedFields %v: want an Apply entry of %s", o, managers(o), controller.FieldManager)
		}
	}
}

// TestPodRecreatedAfterExternalDelete: upstream's behaviour, a running Sandbox whose Pod is
// deleted by someone gets a new Pod under the Sandbox's name.
func TestPodRecreatedAfterExternalDelete(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box"))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	old := &corev1.Pod{}
	if err := get(ns, "box", old); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a new Pod", func() error {
		p := &corev1.Pod{}
		if err := get(ns, "box", p); err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("still the old Pod")
		}
		return nil
	})
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
}

// TestSuspendAndResume: Suspended deletes the Pod (the Service and PVCs stay) and reports
// Suspended=True; Running again creates a fresh Pod.
//
// The create → Ready histogram counts the first Ready only: the resumed Sandbox was not waited
// for since its creation.
func TestSuspendAndResume(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	observed := readyObservations(t)
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	eventually(t, time.Minute, "the first Ready in the histogram", func() error {
		if n := readyObservations(t); n != observed+1 {
			return fmt.Errorf("%d observations, want %d", n, observed+1)
		}
		return nil
	})

	setMode(t, ns, "box", agentsv1beta1.SandboxOperatingModeSuspended)
	eventually(t, time.Minute, "the Pod deleted", func() error { return notFound(ns, "box", &corev1.Pod{}) })
	eventually(t, time.Minute, "Suspended=True/PodTerminated", func() error {
		sb := &agentsv1beta1.Sandbox{}
		if err := get(ns, "box", sb); err != nil {
			return err
		}
		c := findCondition(sb, agentsv1beta1.ConditionSuspended)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != agentsv1beta1.ReasonSuspendedPodTerminated {
			return fmt.Errorf("Suspended condition %+v", c)
		}
		if r := findCondition(sb, agentsv1beta1.ConditionReady); r.Reason != agentsv1beta1.ReasonSandboxSuspended || r.Message != "Sandbox is suspended" {
			return fmt.Errorf("Ready condition %+v", r)
		}
		return nil
	})
	if err := get(ns, "box", &corev1.Service{}); err != nil {
		t.Errorf("the Service must survive a suspend: %v", err)
	}

	setMode(t, ns, "box", agentsv1beta1.SandboxOperatingModeRunning)
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	time.Sleep(500 * time.Millisecond) // the observation follows the status write
	if n := readyObservations(t); n != observed+1 {
		t.Errorf("the histogram has %d observations after the resume, want %d: a resume is not a first Ready", n, observed+1)
	}
}

// readyObservations is how many Sandboxes the create → Ready histogram has counted in this
// process (tests run one controller at a time).
func readyObservations(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "sandbox_gitops_sandbox_ready_seconds" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no sandbox_gitops_sandbox_ready_seconds in the registry")
	return 0
}

// TestFinishedPods: a Pod that ran to completion is neither deleted nor recreated; the Sandbox
// reports Finished and Ready=False with the phase's reason.
func TestFinishedPods(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	for name, outcome := range map[string]string{"ok": "Succeed", "bad": "Fail"} {
		create(t, sandbox(ns, name, func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: outcome}
		}))
	}
	for name, reason := range map[string]string{"ok": agentsv1beta1.ReasonPodSucceeded, "bad": agentsv1beta1.ReasonPodFailed} {
		sb := waitReady(t, ns, name, metav1.ConditionFalse, reason)
		if c := findCondition(sb, agentsv1beta1.ConditionFinished); c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			t.Errorf("%s: Finished condition %+v, want True/%s", name, c, reason)
		}
	}
}

// TestLiveMetadataSync: template label and annotation edits reach the running Pod (its spec is
// never touched), and labels the template drops are removed.
func TestLiveMetadataSync(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.ObjectMeta.Labels["team"] = "a"
	}))
	waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	before := &corev1.Pod{}
	if err := get(ns, "box", before); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "box", func(sb *agentsv1beta1.Sandbox) {
		delete(sb.Spec.PodTemplate.ObjectMeta.Labels, "team")
		sb.Spec.PodTemplate.ObjectMeta.Labels["tier"] = "gold"
		sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"note": "hi"}
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.13"
	})
	eventually(t, time.Minute, "the Pod's metadata synced", func() error {
		p := &corev1.Pod{}
		if err := get(ns, "box", p); err != nil {
			return err
		}
		if p.Labels["tier"] != "gold" || p.Labels["team"] != "" || p.Annotations["note"] != "hi" ||
			p.Annotations[agentsv1beta1.SandboxPropagatedLabelsAnnotation] != "app,tier" {
			return fmt.Errorf("labels %v annotations %v", p.Labels, p.Annotations)
		}
		if p.UID != before.UID || p.Spec.Containers[0].Image != "python:3.12" {
			return fmt.Errorf("the Pod was replaced or its spec changed (image %s)", p.Spec.Containers[0].Image)
		}
		return nil
	})
}

// TestInvalidSandboxReportsField: a Sandbox the render rejects gets Ready=False naming the field,
// and the controller neither crashes nor retries in a hot loop (a second look writes nothing).
func TestInvalidSandboxReportsField(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	// A Service named after a Sandbox must be a DNS-1035 label: "9box" is a valid Sandbox name
	// but no Service can have it.
	create(t, sandbox(ns, "9box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	sb := waitReady(t, ns, "9box", metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError)
	c := findCondition(sb, agentsv1beta1.ConditionReady)
	if want := "metadata.name"; !strings.Contains(c.Message, want) {
		t.Errorf("Ready message %q does not name the field %s", c.Message, want)
	}
	// The status write's Warning event is sent after it, asynchronously, and its watch event may
	// still start one pass; a retry loop, even with backoff (5 ms doubling: about ten in 3 s),
	// would start many.
	settle(t, 15*time.Second)
	before, passes := writeCounts(t), reconciles(t, "sandbox")
	time.Sleep(3 * time.Second)
	if n, by := controllerWrites(before, writeCounts(t)); n != 0 {
		t.Errorf("an invalid Sandbox kept the controller writing: %v", by)
	}
	if n := reconciles(t, "sandbox") - passes; n > 1 {
		t.Errorf("an invalid Sandbox was reconciled %v times in 3 s", n)
	}
}

// reconciles is how many passes the named controller of this process has run, from
// controller-runtime's controller_runtime_reconcile_total.
func reconciles(t testing.TB, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func setMode(t *testing.T, ns, name string, mode agentsv1beta1.SandboxOperatingMode) {
	t.Helper()
	update(t, ns, name, func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = mode })
}

// update changes a Sandbox's spec as a user would (retrying on conflicts with status writes).
func update(t testing.TB, ns, name string, mutate func(*agentsv1beta1.Sandbox)) {
	t.Helper()
	eventually(t, time.Minute, "updating Sandbox "+name, func() error {
		sb := &agentsv1beta1.Sandbox{}
		if err := get(ns, name, sb); err != nil {
			return err
		}
		mutate(sb)
		return admin.Update(context.Background(), sb)
	})
}

func findCondition(sb *agentsv1beta1.Sandbox, typ string) *metav1.Condition {
	for i := range sb.Status.Conditions {
		if sb.Status.Conditions[i].Type == typ {
			return &sb.Status.Conditions[i]
		}
	}
	return nil
}

func appliedBy(o client.Object, manager string) bool {
	for _, e := range o.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func managers(o client.Object) []string {
	var out []string
	for _, e := range o.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}

// TestMultiplePods: a second Pod controlled by the Sandbox makes the controller refuse to choose,
// as upstream: Ready False with reason MultiplePods, and a Warning event of that reason.
func TestMultiplePods(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, sandbox(ns, "box"))
	sb := waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	pod := &corev1.Pod{}
	if err := get(ns, "box", pod); err != nil {
		t.Fatal(err)
	}
	twin := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "box-twin", Namespace: ns, Labels: pod.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind))},
	}, Spec: *pod.Spec.DeepCopy()}
	twin.Spec.NodeName = ""
	create(t, twin)
	waitReady(t, ns, "box", metav1.ConditionFalse, agentsv1beta1.ReasonMultiplePods)
	eventually(t, time.Minute, "a MultiplePods Warning", func() error { return findEvent(ns, "box", agentsv1beta1.ReasonMultiplePods) })
}

// TestAdoptablePVC: a PVC of a volume claim template's name carrying the adoptable label is
// adopted, not created again: it gains the controller reference and the name-hash label (which
// puts it in the controller's cache), and after that no pass writes anything.
func TestAdoptablePVC(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	vct := agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}},
		},
	}
	kept := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: render.PVCName("data", "box"), Namespace: ns, Labels: map[string]string{agentsv1beta1.SandboxAdoptableLabel: "true"}},
		Spec:       vct.Spec,
	}
	create(t, kept)
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{vct}
	}))
	sb := waitReady(t, ns, "box", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	eventually(t, time.Minute, "the PVC adopted", func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := get(ns, kept.Name, pvc); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != sb.UID {
			return fmt.Errorf("controller reference %+v", ref)
		}
		if pvc.UID != kept.UID || pvc.Labels[agentsv1beta1.SandboxNameHashLabel] != render.NameHash("box") {
			return fmt.Errorf("uid %s (kept %s), labels %v", pvc.UID, kept.UID, pvc.Labels)
		}
		return nil
	})
	settle(t, 15*time.Second)
	before, passes := writeCounts(t), reconciles(t, "sandbox")
	update(t, ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Annotations = map[string]string{"touched": "yes"} })
	time.Sleep(3 * time.Second)
	// The test's own update is a "sandboxes PUT", which is not among the controller's writes.
	if n, by := controllerWrites(before, writeCounts(t)); n != 0 {
		t.Errorf("passes after the adoption wrote: %v", by)
	}
	if reconciles(t, "sandbox") == passes {
		t.Error("the touched Sandbox was not reconciled again")
	}
}

// TestSuspendedForeignPod: someone else's Pod under a suspended Sandbox's pod name, which the
// cache (labelled Pods only) cannot show, is read by name and reported as upstream does
// (Suspended False, PodNotOwned; Ready "Sandbox is suspending"), and left alone.
func TestSuspendedForeignPod(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: ns, Labels: map[string]string{"team": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	create(t, foreign)
	create(t, sandbox(ns, "box", func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended }))
	eventually(t, time.Minute, "the foreign Pod reported", func() error {
		sb := &agentsv1beta1.Sandbox{}
		if err := get(ns, "box", sb); err != nil {
			return err
		}
		s, r := findCondition(sb, agentsv1beta1.ConditionSuspended), findCondition(sb, agentsv1beta1.ConditionReady)
		if s == nil || s.Reason != agentsv1beta1.ReasonSuspendedPodNotOwned || r == nil || r.Message != "Sandbox is suspending" {
			return fmt.Errorf("conditions %+v", sb.Status.Conditions)
		}
		return nil
	})
	got := &corev1.Pod{}
	if err := get(ns, "box", got); err != nil {
		t.Fatal(err)
	}
	if got.UID != foreign.UID || len(got.OwnerReferences) != 0 || appliedBy(got, controller.FieldManager) {
		t.Errorf("the foreign Pod was touched: owners %v, managers %v", got.OwnerReferences, managers(got))
	}
}
