package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/poolwatch"
)

// rollingUpdate makes a pool RollingUpdate with the given bounds.
func rollingUpdate(maxSurge, maxUnavailable intstr.IntOrString) func(*extv1beta1.SandboxWarmPool) {
	return func(p *extv1beta1.SandboxWarmPool) {
		p.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.RollingUpdateSandboxWarmPoolUpdateStrategyType,
			RollingUpdate: &extv1beta1.SandboxWarmPoolRollingUpdate{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}}
	}
}

// watchPool follows the pool's members from now until the test ends (testkit/poolwatch).
func watchPool(t *testing.T, ns, pool string) *poolwatch.Watch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	list := func(ctx context.Context) ([]agentsv1beta1.Sandbox, string, error) {
		l := &agentsv1beta1.SandboxList{}
		err := wc.List(ctx, l, client.InNamespace(ns))
		return l.Items, l.ResourceVersion, err
	}
	watchFrom := func(ctx context.Context, rv string) (watch.Interface, error) {
		return wc.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	w, err := poolwatch.Start(context.Background(), pool, list, watchFrom)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// changeTemplate updates a template's spec as a user would.
func changeTemplate(t *testing.T, ns, name string, mutate func(*extv1beta1.SandboxTemplate)) {
	t.Helper()
	eventually(t, time.Minute, "updating SandboxTemplate "+name, func() error {
		tpl := &extv1beta1.SandboxTemplate{}
		if err := get(ns, name, tpl); err != nil {
			return err
		}
		mutate(tpl)
		return admin.Update(context.Background(), tpl)
	})
}

// TestPoolRollingUpdate: after a template change, a RollingUpdate pool (maxSurge 1,
// maxUnavailable 0) replaces its members one at a time: in the order the API server saw the
// changes, its Ready members never drop below spec.replicas and its members never exceed
// spec.replicas+1; the rollout completes with every member made from the new template, and the
// status says RolloutComplete.
func TestPoolRollingUpdate(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 3, rollingUpdate(intstr.FromInt32(1), intstr.FromInt32(0))))
	old := names(waitPoolReady(t, ns, "pool", 3))
	w := watchPool(t, ns, "pool")

	changeTemplate(t, ns, "python", func(tpl *extv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.13"
	})
	eventually(t, 2*time.Minute, "every member made from the new template and Ready", func() error {
		members, ready, err := poolMembers(ns, "pool")
		if err != nil {
			return err
		}
		for _, m := range members {
			if img := m.Spec.PodTemplate.Spec.Containers[0].Image; img != "python:3.13" {
				return fmt.Errorf("member %s still runs %s", m.Name, img)
			}
		}
		if len(members) != 3 || ready != 3 {
			return fmt.Errorf("%d members, %d Ready", len(members), ready)
		}
		return nil
	})
	pool := &extv1beta1.SandboxWarmPool{}
	eventually(t, time.Minute, "RolloutComplete", func() error {
		if err := get(ns, "pool", pool); err != nil {
			return err
		}
		c := meta.FindStatusCondition(pool.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
		if c == nil || c.Reason != extv1beta1.RolloutCompleteReason || pool.Status.UpdatedReadyReplicas != 3 {
			return fmt.Errorf("Progressing %+v, %d updated Ready", c, pool.Status.UpdatedReadyReplicas)
		}
		return nil
	})
	// Let the last deletions' events arrive before reading the record.
	time.Sleep(time.Second)
	minReady, maxAll := w.Record()
	if minReady < 3 {
		t.Errorf("the pool went down to %d Ready members during the rollout; maxUnavailable 0 keeps 3", minReady)
	}
	if maxAll > 4 {
		t.Errorf("the pool had %d members during the rollout; maxSurge 1 allows 4", maxAll)
	}
	now := names(waitPoolReady(t, ns, "pool", 3))
	for _, n := range now {
		for _, o := range old {
			if n == o {
				t.Errorf("member %s of the old template is still there", n)
			}
		}
	}
	t.Logf("Ready members at least %d, members at most %d", minReady, maxAll)
}

// TestPoolRollingUpdateNeverReady: a RollingUpdate whose new members never become Ready stops at
// its bound (one new member beside the old ones) and keeps every old Ready member, and its
// status turns ProgressDeadlineExceeded.
func TestPoolRollingUpdateNeverReady(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 2, rollingUpdate(intstr.FromString("25%"), intstr.FromString("25%")), func(p *extv1beta1.SandboxWarmPool) {
		p.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	}))
	old := names(waitPoolReady(t, ns, "pool", 2))
	w := watchPool(t, ns, "pool")

	changeTemplate(t, ns, "python", func(tpl *extv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.13"
		tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "Pending"}
	})
	pool := &extv1beta1.SandboxWarmPool{}
	eventually(t, time.Minute, "ProgressDeadlineExceeded", func() error {
		if err := get(ns, "pool", pool); err != nil {
			return err
		}
		c := meta.FindStatusCondition(pool.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != extv1beta1.ProgressDeadlineExceededReason {
			return fmt.Errorf("Progressing %+v", c)
		}
		if !strings.Contains(c.Message, "1 updated (template hash ") || !strings.Contains(c.Message, "2 members are from an older template") {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	// A few passes more: nothing changes.
	time.Sleep(3 * time.Second)
	members, ready, err := poolMembers(ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	var stale, updated []string
	for _, m := range members {
		if m.Spec.PodTemplate.Spec.Containers[0].Image == "python:3.13" {
			updated = append(updated, m.Name)
		} else {
			stale = append(stale, m.Name)
		}
	}
	if diff := cmp.Diff(old, slices.Sorted(slices.Values(stale))); diff != "" {
		t.Errorf("the old members (-before +now):\n%s", diff)
	}
	if len(updated) != 1 || ready != 2 {
		t.Errorf("%d new members (%v), %d Ready; want the one surge member and the 2 old ones Ready", len(updated), updated, ready)
	}
	if minReady, maxAll := w.Record(); minReady < 2 || maxAll > 3 {
		t.Errorf("Ready members went down to %d (want 2), members up to %d (want 3)", minReady, maxAll)
	}
	if !meta.IsStatusConditionTrue(pool.Status.Conditions, extv1beta1.SandboxWarmPoolAvailable) {
		t.Errorf("the pool is not Available: %+v", pool.Status.Conditions)
	}
}
