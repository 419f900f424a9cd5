package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
)

// TestRefusedWriteReported: when the API server refuses a child on its merits (here a
// ResourceQuota allowing no Pods), the Sandbox says so as upstream's does for any error of a pass,
// Ready False / ReconcilerError "Error seen: …", instead of only the controller's log knowing.
// Once the quota goes, the retry creates the Pod and the Sandbox becomes Ready.
func TestRefusedWriteReported(t *testing.T) {
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	create(t, quota)
	// envtest runs no quota controller: the admission plugin enforces what status says.
	quota.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")},
		Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")},
	}
	if err := admin.Status().Update(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	startController(t, ns, controller.Options{})

	create(t, sandbox(ns, "refused"))
	sb := waitReady(t, ns, "refused", metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError)
	c := findCondition(sb, agentsv1beta1.ConditionReady)
	if !strings.HasPrefix(c.Message, "Error seen: ") || !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("Ready message %q does not carry the API server's refusal", c.Message)
	}
	if findCondition(sb, agentsv1beta1.ConditionPodScheduled) != nil {
		t.Errorf("a PodScheduled condition for a Pod that was never created: %+v", sb.Status.Conditions)
	}

	if err := admin.Delete(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Sandbox Ready once the quota is gone", func() error {
		sb := &agentsv1beta1.Sandbox{}
		if err := get(ns, "refused", sb); err != nil {
			return err
		}
		if c := findCondition(sb, agentsv1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
}
