package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// warmPool is a SandboxWarmPool of n members of the named template.
func warmPool(ns, name, tpl string, n int32, mutate ...func(*extv1beta1.SandboxWarmPool)) *extv1beta1.SandboxWarmPool {
	p := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(n), TemplateRef: extv1beta1.SandboxTemplateRef{Name: tpl}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// sandboxClaim is a claim on the named pool, shaped like the Python SDK's.
func sandboxClaim(ns, name, pool string, mutate ...func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{agentsv1beta1.CreatedByLabel: "python-client"}},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// waitClaim waits for the claim's Ready condition to have the given status and reason.
func waitClaim(t testing.TB, ns, name string, status metav1.ConditionStatus, reason string) *extv1beta1.SandboxClaim {
	t.Helper()
	c := &extv1beta1.SandboxClaim{}
	eventually(t, time.Minute, fmt.Sprintf("SandboxClaim %s Ready=%s/%s", name, status, reason), func() error {
		if err := get(ns, name, c); err != nil {
			return err
		}
		r := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
		if r == nil {
			return fmt.Errorf("no Ready condition yet")
		}
		if r.Status != status || (reason != "" && r.Reason != reason) {
			return fmt.Errorf("Ready=%s/%s: %s", r.Status, r.Reason, r.Message)
		}
		return nil
	})
	return c
}

// poolMembers lists the Sandboxes a pool controls, and how many of them are Ready.
func poolMembers(ns, pool string) (members []agentsv1beta1.Sandbox, ready int, err error) {
	list := &agentsv1beta1.SandboxList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.SandboxWarmPoolLabel: render.NameHash(pool)}); err != nil {
		return nil, 0, err
	}
	for _, sb := range list.Items {
		ref := metav1.GetControllerOf(&sb)
		if ref == nil || ref.Kind != extv1beta1.SandboxWarmPoolKind || ref.Name != pool || sb.DeletionTimestamp != nil {
			continue
		}
		members = append(members, sb)
		if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			ready++
		}
	}
	return members, ready, nil
}

// waitPoolReady waits until the pool has exactly n members, all Ready.
func waitPoolReady(t testing.TB, ns, pool string, n int) []agentsv1beta1.Sandbox {
	t.Helper()
	var members []agentsv1beta1.Sandbox
	eventually(t, 60*time.Second, fmt.Sprintf("pool %s with %d Ready members", pool, n), func() error {
		var ready int
		var err error
		if members, ready, err = poolMembers(ns, pool); err != nil {
			return err
		}
		if len(members) != n || ready != n {
			return fmt.Errorf("%d members, %d Ready", len(members), ready)
		}
		return nil
	})
	return members
}

// updateClaim changes a claim's spec as a user would (retrying on conflicts with status writes).
func updateClaim(t testing.TB, ns, name string, mutate func(*extv1beta1.SandboxClaim)) {
	t.Helper()
	eventually(t, time.Minute, "updating SandboxClaim "+name, func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := get(ns, name, c); err != nil {
			return err
		}
		mutate(c)
		return admin.Update(context.Background(), c)
	})
}
