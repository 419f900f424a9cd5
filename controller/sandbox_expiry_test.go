package controller_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
)

// TestExpiry: at shutdownTime (acted on at that moment through a requeue, not by polling) the
// Pod and Service go; Retain keeps the Sandbox with only its conditions and Ready=SandboxExpired,
// Delete deletes the Sandbox itself. PVCs are never deleted by the controller.
//
// The Sandboxes are made with a shutdownTime an hour ahead, which is then moved to a moment
// just ahead once they run: no fixed lead from creation outlasts the start of a Sandbox on a
// machine whose cores are busy with other work.
func TestExpiry(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	for _, policy := range []agentsv1beta1.ShutdownPolicy{agentsv1beta1.ShutdownPolicyRetain, agentsv1beta1.ShutdownPolicyDelete} {
		name := map[agentsv1beta1.ShutdownPolicy]string{agentsv1beta1.ShutdownPolicyRetain: "retain", agentsv1beta1.ShutdownPolicyDelete: "delete"}[policy]
		create(t, sandbox(ns, name, func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.Service = ptr.To(true)
			sb.Spec.ShutdownTime = &later
			sb.Spec.ShutdownPolicy = ptr.To(policy)
			sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{
				EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "work"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}},
				},
			}}
		}))
	}
	waitReady(t, ns, "retain", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	at := metav1.NewTime(time.Now().Add(3 * time.Second).Truncate(time.Second))
	for _, name := range []string{"retain", "delete"} {
		update(t, ns, name, func(sb *agentsv1beta1.Sandbox) { sb.Spec.ShutdownTime = &at })
	}

	sb := waitReady(t, ns, "retain", metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired)
	// Acted on at shutdownTime: the condition's time (whole seconds) is that moment and never
	// before. A Sandbox that runs is reconciled again only by a requeue (nothing else happens to
	// it), so being marked at all says the requeue came; the 10 s allowed after it are for a
	// machine busy with other work.
	if c := findCondition(sb, agentsv1beta1.ConditionReady); c.LastTransitionTime.Before(&at) || c.LastTransitionTime.Time.After(at.Add(10*time.Second)) {
		t.Errorf("marked expired at %v, want within 10 s after shutdownTime %v", c.LastTransitionTime.Time, at.Time)
	}
	eventually(t, time.Minute, "the retained Sandbox's Pod and Service deleted, status stripped", func() error {
		if err := notFound(ns, "retain", &corev1.Pod{}); err != nil {
			return err
		}
		if err := notFound(ns, "retain", &corev1.Service{}); err != nil {
			return err
		}
		if err := get(ns, "retain", sb); err != nil {
			return err
		}
		if sb.Status.Service != "" || sb.Status.LabelSelector != "" || len(sb.Status.PodIPs) != 0 {
			return fmt.Errorf("status still has %+v", sb.Status)
		}
		return nil
	})
	eventually(t, time.Minute, "the Delete-policy Sandbox deleted", func() error {
		return notFound(ns, "delete", &agentsv1beta1.Sandbox{})
	})
	// envtest runs no garbage collector: what remains of the deleted Sandbox's children is
	// left to it, through the owner references checked here.
	for _, name := range []string{"work-retain", "work-delete"} {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := get(ns, name, pvc); err != nil {
			t.Errorf("PVC %s: %v (the controller never deletes PVCs)", name, err)
			continue
		}
		if ref := metav1.GetControllerOf(pvc); ref == nil || ref.Kind != "Sandbox" {
			t.Errorf("PVC %s has no Sandbox controller reference for garbage collection: %+v", name, ref)
		}
	}
}
