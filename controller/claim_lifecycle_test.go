package controller_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestClaimLifecycle: at shutdownTime a Retain claim is marked expired and its Sandbox deleted
// while the claim stays; a claim whose Sandbox finished is deleted ttlSecondsAfterFinished after
// the Finished condition it mirrors; DeleteForeground deletes the claim with foreground
// propagation.
func TestClaimLifecycle(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, template(ns, "finishes", func(tp *extv1beta1.SandboxTemplate) {
		tp.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "Succeed"}
	}))
	create(t, warmPool(ns, "pool", "python", 0))
	create(t, warmPool(ns, "finishing", "finishes", 0))

	// An hour ahead, moved to a moment just ahead once the claim is Ready: no fixed lead from
	// creation outlasts a start on a machine busy with other work.
	later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	create(t, sandboxClaim(ns, "retain", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &later, ShutdownPolicy: extv1beta1.ShutdownPolicyRetain}
	}))
	create(t, sandboxClaim(ns, "foreground", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &later, ShutdownPolicy: extv1beta1.ShutdownPolicyDeleteForeground}
	}))
	create(t, sandboxClaim(ns, "ttl", "finishing", func(c *extv1beta1.SandboxClaim) {
		c.Spec.Lifecycle = &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To(int32(2)), ShutdownPolicy: extv1beta1.ShutdownPolicyDelete}
	}))
	waitClaim(t, ns, "retain", metav1.ConditionTrue, "")
	at := metav1.NewTime(time.Now().Add(3 * time.Second).Truncate(time.Second))
	for _, name := range []string{"retain", "foreground"} {
		updateClaim(t, ns, name, func(c *extv1beta1.SandboxClaim) { c.Spec.Lifecycle.ShutdownTime = &at })
	}

	var finishedAt time.Time
	eventually(t, time.Minute, "the ttl claim mirrors Finished", func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := get(ns, "ttl", c); err != nil {
			return err
		}
		f := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionFinished)
		if f == nil || f.Status != metav1.ConditionTrue {
			return fmt.Errorf("no Finished=True: %+v", c.Status.Conditions)
		}
		finishedAt = f.LastTransitionTime.Time
		return nil
	})
	eventually(t, time.Minute, "the ttl claim deleted", func() error { return notFound(ns, "ttl", &extv1beta1.SandboxClaim{}) })
	if d := time.Since(finishedAt); d < 2*time.Second {
		t.Errorf("the ttl claim went %v after Finished, before its 2 s", d)
	}

	c := waitClaim(t, ns, "retain", metav1.ConditionFalse, extv1beta1.ClaimExpiredReason)
	if time.Now().Before(at.Time) {
		t.Errorf("expired before its shutdownTime")
	}
	if msg := readyMessage(c); msg != render.ClaimExpiredMessage {
		t.Errorf("message %q", msg)
	}
	eventually(t, time.Minute, "the retained claim's Sandbox deleted", func() error { return notFound(ns, "retain", &agentsv1beta1.Sandbox{}) })
	// Events wait behind the writes somebody waits on (the gate), and are sent asynchronously.
	eventually(t, time.Minute, "the ClaimExpiredReason event", func() error { return findEvent(ns, "retain", extv1beta1.ClaimExpiredReason) })
	eventually(t, time.Minute, "the foreground claim being deleted", func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := get(ns, "foreground", c); err != nil {
			return err
		}
		// envtest runs no garbage collector: the claim waits on its foregroundDeletion finalizer.
		if c.DeletionTimestamp == nil || len(c.Finalizers) == 0 || c.Finalizers[0] != metav1.FinalizerDeleteDependents {
			return fmt.Errorf("deletionTimestamp %v, finalizers %v", c.DeletionTimestamp, c.Finalizers)
		}
		return nil
	})
}

// TestClaimRejections: each claim problem is a Ready=False condition with upstream's reason and
// message, and a claim in that state sends no more writes.
func TestClaimRejections(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 0))
	create(t, sandbox(ns, "taken"))
	cases := map[string]struct {
		mutate      func(*extv1beta1.SandboxClaim)
		reason, msg string
	}{
		"bad-label": {func(c *extv1beta1.SandboxClaim) { c.Spec.AdditionalPodMetadata.Labels = map[string]string{"team": "a"} },
			render.ReasonInvalidMetadata, `invalid additionalPodMetadata: failed to validate label "team": label "team" must have a domain prefix (e.g. 'sandbox.users.io/my-label') to prevent opting into unintended policy domains`},
		"env": {func(c *extv1beta1.SandboxClaim) { c.Spec.Env = []extv1beta1.EnvVar{{Name: "A", Value: ptr.To("b")}} },
			render.ReasonEnvVarsInjectionRejected, "environment variable injection rejected: environment variable injection is not allowed by the template policy"},
		"vct": {func(c *extv1beta1.SandboxClaim) {
			c.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{
				EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}}},
			}}
		}, render.ReasonVolumeClaimTemplatesError, "failed to merge volume claim templates: volume claim templates are disallowed by the template"},
		"taken": {nil, render.ReasonReconcilerError, `Error seen: sandbox "taken" is not controlled by claim "taken". Please use a different claim name or delete the sandbox manually`},
	}
	for name, tc := range cases {
		c := sandboxClaim(ns, name, "pool")
		if tc.mutate != nil {
			tc.mutate(c)
		}
		create(t, c)
	}
	for name, tc := range cases {
		c := waitClaim(t, ns, name, metav1.ConditionFalse, tc.reason)
		if msg := readyMessage(c); msg != tc.msg {
			t.Errorf("%s: message\n  %q\nwant\n  %q", name, msg, tc.msg)
		}
	}
	// The user's own Sandbox "taken" runs too; its writes end when it is Ready.
	waitReady(t, ns, "taken", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	time.Sleep(time.Second)
	w0 := writeCounts(t)
	time.Sleep(2 * time.Second)
	if n, by := controllerWrites(w0, writeCounts(t)); n != 0 {
		t.Errorf("rejected claims wrote %v times in 2 s: %v", n, by)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := get(ns, "taken", sb); err != nil {
		t.Fatal(err)
	}
	if len(sb.OwnerReferences) != 0 {
		t.Errorf("the user's Sandbox was taken over: %+v", sb.OwnerReferences)
	}

}
