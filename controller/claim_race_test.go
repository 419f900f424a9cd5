package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
)

// TestClaimAdoptionRace: 20 claims created at once against a pool of 5 Ready members, with
// several claim workers, give exactly 5 warm adoptions and 15 cold starts, every claim Ready with
// one Sandbox of its own, and no Sandbox with two claim owners; 50 times. The pools are filled
// first, then the race runs with the pool reconciler off, so that no replacement member (which a
// late claim could rightly adopt) blurs the count.
func TestClaimAdoptionRace(t *testing.T) {
	const rounds, claims, members = 50, 20, 5
	ns := newNamespace(t)
	create(t, template(ns, "python"))
	stop := startController(t, ns, controller.Options{})
	for r := range rounds {
		create(t, warmPool(ns, fmt.Sprintf("pool-%d", r), "python", members))
	}
	for r := range rounds {
		waitPoolReady(t, ns, fmt.Sprintf("pool-%d", r), members)
	}
	stop()
	startController(t, ns, controller.Options{Controllers: []string{"sandbox", "sandboxclaim"}, ClaimWorkers: 8})

	// Rounds run five at a time on their own pools: more contention than one at a time, and a
	// third of the time.
	const parallelRounds = 5
	errs := make([]error, rounds)
	var wg sync.WaitGroup
	for g := range parallelRounds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := g; r < rounds; r += parallelRounds {
				if errs[r] = adoptionRound(ns, fmt.Sprintf("pool-%d", r), r, claims, members); errs[r] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("round %d: %v", r, err)
		}
	}
}

// adoptionRound creates the claims of one round at once and checks the outcome.
func adoptionRound(ns, pool string, r, claims, members int) error {
	ctx := context.Background()
	var wg sync.WaitGroup
	createErrs := make([]error, claims)
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			createErrs[i] = admin.Create(ctx, sandboxClaim(ns, fmt.Sprintf("r%d-c%d", r, i), pool))
		}()
	}
	wg.Wait()
	if err := errors.Join(createErrs...); err != nil {
		return err
	}
	uids := map[string]string{} // claim UID -> claim name
	deadline := time.Now().Add(90 * time.Second)
	for {
		list := &extv1beta1.SandboxClaimList{}
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := 0
		for _, c := range list.Items {
			if c.Spec.WarmPoolRef.Name != pool {
				continue
			}
			uids[string(c.UID)] = c.Name
			if meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady) && c.Status.SandboxStatus.Name != "" {
				ready++
			}
		}
		if ready == claims {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d claims Ready after 90 s", ready, claims)
		}
		time.Sleep(100 * time.Millisecond)
	}

	sandboxes := &agentsv1beta1.SandboxList{}
	if err := admin.List(ctx, sandboxes, client.InNamespace(ns)); err != nil {
		return err
	}
	var problems []error
	perClaim := map[string]int{}
	warm, cold := 0, 0
	for _, sb := range sandboxes.Items {
		owners := 0
		var owner string
		for _, ref := range sb.OwnerReferences {
			if ref.Kind == extv1beta1.SandboxClaimKind {
				owners++
				owner = string(ref.UID)
			}
		}
		if owners > 1 {
			problems = append(problems, fmt.Errorf("Sandbox %s has %d claim owners: %+v", sb.Name, owners, sb.OwnerReferences))
		}
		if _, ours := uids[owner]; !ours {
			continue
		}
		perClaim[owner]++
		switch sb.Labels[agentsv1beta1.SandboxLaunchTypeLabel] {
		case agentsv1beta1.SandboxLaunchTypeWarm:
			warm++
		case agentsv1beta1.SandboxLaunchTypeCold:
			cold++
			if sb.Name != uids[owner] {
				problems = append(problems, fmt.Errorf("cold Sandbox %s of claim %s is not named after it", sb.Name, uids[owner]))
			}
		}
	}
	for uid, name := range uids {
		if perClaim[uid] != 1 {
			problems = append(problems, fmt.Errorf("claim %s has %d Sandboxes", name, perClaim[uid]))
		}
	}
	if warm != members || cold != claims-members {
		problems = append(problems, fmt.Errorf("%d warm adoptions and %d cold starts, want %d and %d", warm, cold, members, claims-members))
	}
	if left, _, err := poolMembers(ns, pool); err != nil || len(left) != 0 {
		problems = append(problems, fmt.Errorf("%d members left in the pool (%v), want every one adopted", len(left), err))
	}
	return errors.Join(problems...)
}
