package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
)

// TestClaimRestartMidAdoption: the controller is stopped while claims are being adopted and
// started again; every claim ends Ready with exactly one Sandbox, none with two claim owners.
func TestClaimRestartMidAdoption(t *testing.T) {
	ns := newNamespace(t)
	create(t, template(ns, "python"))
	stop := startController(t, ns, controller.Options{})
	create(t, warmPool(ns, "pool", "python", 5))
	waitPoolReady(t, ns, "pool", 5)
	for i := range 10 {
		create(t, sandboxClaim(ns, fmt.Sprintf("c%d", i), "pool"))
	}
	time.Sleep(30 * time.Millisecond)
	stop()
	startController(t, ns, controller.Options{})
	uids := map[types.UID]string{}
	for i := range 10 {
		c := waitClaim(t, ns, fmt.Sprintf("c%d", i), metav1.ConditionTrue, "")
		uids[c.UID] = c.Name
	}
	checkOneSandboxPerClaim(t, ns, uids)
}

// TestClaimDeletedWhileAdopting: claims deleted right after they are created leave nothing
// behind but Sandboxes owned by them (which garbage collection removes with them), and the pool
// is full again.
func TestClaimDeletedWhileAdopting(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 3))
	waitPoolReady(t, ns, "pool", 3)
	ctx := context.Background()
	deleted := map[types.UID]bool{}
	for i := range 3 {
		c := sandboxClaim(ns, fmt.Sprintf("gone-%d", i), "pool")
		create(t, c)
		deleted[c.UID] = true
		if err := admin.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	waitPoolReady(t, ns, "pool", 3)
	list := &agentsv1beta1.SandboxList{}
	if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Items {
		ref := metav1.GetControllerOf(&sb)
		switch {
		case ref == nil:
			t.Errorf("Sandbox %s has no owner: leaked", sb.Name)
		case ref.Kind == extv1beta1.SandboxClaimKind && !deleted[ref.UID]:
			t.Errorf("Sandbox %s is owned by an unknown claim %s", sb.Name, ref.UID)
		}
	}
}

// checkOneSandboxPerClaim fails unless every claim controls exactly one Sandbox and no Sandbox
// has two claim owners.
func checkOneSandboxPerClaim(t *testing.T, ns string, claims map[types.UID]string) {
	t.Helper()
	list := &agentsv1beta1.SandboxList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	per := map[types.UID]int{}
	for _, sb := range list.Items {
		n := 0
		for _, ref := range sb.OwnerReferences {
			if ref.Kind == extv1beta1.SandboxClaimKind {
				n++
				per[ref.UID]++
			}
		}
		if n > 1 {
			t.Errorf("Sandbox %s has %d claim owners", sb.Name, n)
		}
	}
	for uid, name := range claims {
		if per[uid] != 1 {
			t.Errorf("claim %s has %d Sandboxes", name, per[uid])
		}
	}
}
