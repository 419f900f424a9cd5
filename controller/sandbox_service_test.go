package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestServiceModes follows upstream's three states of spec.service: true creates the headless
// Service; unset keeps one the Sandbox already owns (and still requires it for Ready) but never
// creates one; false deletes the owned one.
func TestServiceModes(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})

	create(t, sandbox(ns, "unset"))
	sb := waitReady(t, ns, "unset", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	if err := get(ns, "unset", &corev1.Service{}); err == nil {
		t.Errorf("spec.service unset created a Service")
	}
	if sb.Status.Service != "" {
		t.Errorf("status.service %q without a Service", sb.Status.Service)
	}

	create(t, sandbox(ns, "svc", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }))
	waitReady(t, ns, "svc", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	svc := &corev1.Service{}
	if err := get(ns, "svc", svc); err != nil {
		t.Fatal(err)
	}
	hash := render.NameHash("svc")
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[agentsv1beta1.SandboxNameHashLabel] != hash ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "p-8888-tcp" {
		t.Errorf("Service spec %+v is not upstream's headless Service", svc.Spec)
	}

	// Unset keeps the owned Service and fixes the selector drift; the Ready message keeps
	// requiring it (upstream's back-compat rule).
	update(t, ns, "svc", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = nil })
	patchSelector(t, ns, "svc", map[string]string{"someone": "else"})
	eventually(t, time.Minute, "the kept Service's selector restored", func() error {
		s := &corev1.Service{}
		if err := get(ns, "svc", s); err != nil {
			return err
		}
		if len(s.Spec.Selector) != 1 || s.Spec.Selector[agentsv1beta1.SandboxNameHashLabel] != hash {
			return fmt.Errorf("selector %v", s.Spec.Selector)
		}
		return nil
	})
	sb = waitReady(t, ns, "svc", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	if c := findCondition(sb, agentsv1beta1.ConditionReady); c.Message != "Pod is Ready; Service Exists" {
		t.Errorf("Ready message %q with a kept Service", c.Message)
	}

	update(t, ns, "svc", func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(false) })
	eventually(t, time.Minute, "the owned Service deleted", func() error { return notFound(ns, "svc", &corev1.Service{}) })
	eventually(t, time.Minute, "status.service cleared", func() error {
		s := &agentsv1beta1.Sandbox{}
		if err := get(ns, "svc", s); err != nil {
			return err
		}
		if s.Status.Service != "" || s.Status.ServiceFQDN != "" {
			return fmt.Errorf("status.service %q", s.Status.Service)
		}
		return nil
	})
}

// patchSelector changes a Service's selector as another field manager would.
func patchSelector(t *testing.T, ns, name string, selector map[string]string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := get(ns, name, svc); err != nil {
		t.Fatal(err)
	}
	orig := svc.DeepCopy()
	svc.Spec.Selector = selector
	if err := admin.Patch(context.Background(), svc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}
