package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

func template(ns, name string, mutate ...func(*extv1beta1.SandboxTemplate)) *extv1beta1.SandboxTemplate {
	sb := sandbox(ns, name)
	t := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       extv1beta1.SandboxTemplateSpec{SandboxBlueprint: sb.Spec.SandboxBlueprint},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

// TestTemplateNetworkPolicy covers networkPolicyManagement: Managed without rules gets the secure
// default, custom rules are copied verbatim, {} denies everything, Unmanaged removes the policy
// the template owns; drift is put back; the template itself is never written to.
func TestTemplateNetworkPolicy(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	port := networkingv1.NetworkPolicyPort{Port: intOrString(8888)}
	cases := map[string]*extv1beta1.SandboxTemplate{
		"secure-default": template(ns, "secure-default"),
		"custom": template(ns, "custom", func(t *extv1beta1.SandboxTemplate) {
			t.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port}}}}
		}),
		"deny-all": template(ns, "deny-all", func(t *extv1beta1.SandboxTemplate) { t.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{} }),
	}
	for _, tpl := range cases {
		create(t, tpl)
	}
	for name, tpl := range cases {
		stored := &extv1beta1.SandboxTemplate{}
		if err := get(ns, name, stored); err != nil {
			t.Fatal(err)
		}
		want := render.TemplateNetworkPolicy(stored, render.Options{})
		eventually(t, time.Minute, "NetworkPolicy of "+name, func() error {
			np := &networkingv1.NetworkPolicy{}
			if err := get(ns, render.NetworkPolicyName(name), np); err != nil {
				return err
			}
			if !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
				return fmt.Errorf("spec differs from the render (-render +cluster):\n%s", cmp.Diff(want.Spec, np.Spec))
			}
			if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != stored.UID {
				return fmt.Errorf("owner reference %+v, want the template", ref)
			}
			return nil
		})
		_ = tpl
	}

	// Drift on a managed policy is put back.
	np := &networkingv1.NetworkPolicy{}
	if err := get(ns, "secure-default-network-policy", np); err != nil {
		t.Fatal(err)
	}
	orig := np.DeepCopy()
	np.Spec.Egress = nil
	if err := admin.Patch(context.Background(), np, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the drifted policy restored", func() error {
		got := &networkingv1.NetworkPolicy{}
		if err := get(ns, "secure-default-network-policy", got); err != nil {
			return err
		}
		if len(got.Spec.Egress) == 0 {
			return fmt.Errorf("egress still removed")
		}
		return nil
	})

	// Unmanaged: the owned policy is deleted.
	tpl := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "custom", tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManagementUnmanaged
	if err := admin.Update(context.Background(), tpl); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Unmanaged template's policy deleted", func() error {
		return notFound(ns, "custom-network-policy", &networkingv1.NetworkPolicy{})
	})
	stored := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "secure-default", stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Labels) != 0 || stored.Generation != 1 {
		t.Errorf("the controller wrote into the template: labels %v, generation %d", stored.Labels, stored.Generation)
	}
}

// TestTemplateRefusesForeignPolicy: a policy of the template's policy name that another owner
// controls is never changed; the template gets a Warning event instead.
func TestTemplateRefusesForeignPolicy(t *testing.T) {
	ns := newNamespace(t)
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "python-network-policy", Namespace: ns},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}},
	}
	create(t, foreign)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	eventually(t, time.Minute, "a Warning event on the template", func() error {
		return findEvent(ns, "python", "NetworkPolicyConflict")
	})
	// The conflict is retried with backoff (about ten times in these 3 s); it is reported once:
	// a repeat would have made the event a series.
	time.Sleep(3 * time.Second)
	list := &eventsv1.EventList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == "NetworkPolicyConflict" && e.Series != nil {
			t.Errorf("the conflict was reported %d times", e.Series.Count)
		}
	}
	got := &networkingv1.NetworkPolicy{}
	if err := get(ns, "python-network-policy", got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, foreign.Spec) || appliedBy(got, controller.FieldManager) {
		t.Errorf("the foreign policy was changed: %+v, managers %v", got.Spec, managers(got))
	}
}
