package controller_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// TestPoolFillsAndScales: a pool fills to spec.replicas with the members the render shows
// (preview == reality: same names, labels, annotations, pod template), reports its status, and
// follows the scale subresource up and down as kubectl scale and an HPA drive it (client-go's
// scale client).
func TestPoolFillsAndScales(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 3))
	members := waitPoolReady(t, ns, "pool", 3)

	pool := &extv1beta1.SandboxWarmPool{}
	tpl := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "pool", pool); err != nil {
		t.Fatal(err)
	}
	if err := get(ns, "python", tpl); err != nil {
		t.Fatal(err)
	}
	// The render of the same pool and template (no UIDs in Git: owner references aside).
	out, err := render.Render(&render.Input{Templates: []*extv1beta1.SandboxTemplate{stripped(tpl)}, Pools: []*extv1beta1.SandboxWarmPool{stripped(pool)}}, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]*agentsv1beta1.Sandbox{}
	for _, c := range out {
		if sb, ok := c.Object.(*agentsv1beta1.Sandbox); ok {
			rendered[sb.Name] = sb
		}
	}
	for _, m := range members {
		want := rendered[m.Name]
		if want == nil {
			t.Errorf("member %s is not one the render shows (it shows %v)", m.Name, keys(rendered))
			continue
		}
		if diff := cmp.Diff(want.Labels, m.Labels); diff != "" {
			t.Errorf("member %s labels (-render +cluster):\n%s", m.Name, diff)
		}
		if diff := cmp.Diff(want.Annotations, m.Annotations); diff != "" {
			t.Errorf("member %s annotations (-render +cluster):\n%s", m.Name, diff)
		}
		if diff := cmp.Diff(want.Spec.PodTemplate, m.Spec.PodTemplate); diff != "" {
			t.Errorf("member %s pod template (-render +cluster):\n%s", m.Name, diff)
		}
		if ref := metav1.GetControllerOf(&m); ref == nil || ref.UID != pool.UID {
			t.Errorf("member %s is not controlled by the pool: %+v", m.Name, m.OwnerReferences)
		}
	}
	eventually(t, time.Minute, "pool status", func() error {
		if err := get(ns, "pool", pool); err != nil {
			return err
		}
		want := extv1beta1.SandboxWarmPoolStatus{Replicas: 3, ReadyReplicas: 3, Selector: agentsv1beta1.SandboxWarmPoolLabel + "=" + render.NameHash("pool"), ObservedGeneration: pool.Generation,
			UpdatedReplicas: 3, UpdatedReadyReplicas: 3, Conditions: []metav1.Condition{
				{Type: extv1beta1.SandboxWarmPoolAvailable, Status: metav1.ConditionTrue, Reason: extv1beta1.MinimumReplicasAvailableReason, Message: "3 of 3 members Ready", ObservedGeneration: pool.Generation},
				{Type: extv1beta1.SandboxWarmPoolProgressing, Status: metav1.ConditionFalse, Reason: extv1beta1.RolloutCompleteReason, Message: "Every member wanted exists and is Ready: 3 updated, 3 updated Ready, 3 desired", ObservedGeneration: pool.Generation},
			}}
		if diff := cmp.Diff(want, pool.Status, ignoreTransitionTimes); diff != "" {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		return nil
	})

	scales := scaleClient(t)
	gr := schema.GroupResource{Group: extv1beta1.GroupVersion.Group, Resource: "sandboxwarmpools"}
	ctx := context.Background()
	s, err := scales.Scales(ns).Get(ctx, gr, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.Replicas != 3 || s.Status.Replicas != 3 || s.Status.Selector != pool.Status.Selector {
		t.Errorf("scale subresource: %+v", s)
	}
	for _, n := range []int32{5, 1} {
		// As kubectl scale and the HPA do: read the scale, set it, and read again on a conflict
		// (the controller writes the pool's status meanwhile).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := scales.Scales(ns).Get(ctx, gr, "pool", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Replicas = n
			_, err = scales.Scales(ns).Update(ctx, gr, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("scaling to %d: %v", n, err)
		}
		waitPoolReady(t, ns, "pool", int(n))
		eventually(t, time.Minute, fmt.Sprintf("scale status at %d", n), func() error {
			got, err := scales.Scales(ns).Get(ctx, gr, "pool", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Replicas != n {
				return fmt.Errorf("status.replicas %d", got.Status.Replicas)
			}
			return nil
		})
	}
}

// TestPoolReplacesDeletedMember: a member deleted by hand is replaced under a new name.
func TestPoolReplacesDeletedMember(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 2))
	members := waitPoolReady(t, ns, "pool", 2)
	gone := members[0].Name
	if err := admin.Delete(context.Background(), &members[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a replacement", func() error {
		now, ready, err := poolMembers(ns, "pool")
		if err != nil {
			return err
		}
		if len(now) != 2 || ready != 2 {
			return fmt.Errorf("%d members, %d Ready", len(now), ready)
		}
		for _, m := range now {
			if m.Name == gone {
				return fmt.Errorf("%s is still there", gone)
			}
		}
		return nil
	})
}

// TestPoolUpdateStrategy: after a template spec change, a Recreate pool replaces its stale
// members and an OnReplenish pool keeps them; a template metadata change makes nothing stale.
func TestPoolUpdateStrategy(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "recreate", "python", 2, func(p *extv1beta1.SandboxWarmPool) {
		p.Spec.UpdateStrategy = &extv1beta1.SandboxWarmPoolUpdateStrategy{Type: extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType}
	}))
	create(t, warmPool(ns, "replenish", "python", 2))
	oldRecreate := names(waitPoolReady(t, ns, "recreate", 2))
	oldReplenish := names(waitPoolReady(t, ns, "replenish", 2))

	tpl := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "python", tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"note": "metadata only"}
	if err := admin.Update(context.Background(), tpl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := names(waitPoolReady(t, ns, "recreate", 2)); !cmp.Equal(got, oldRecreate) {
		t.Errorf("a metadata change replaced Recreate members: %v -> %v", oldRecreate, got)
	}

	if err := get(ns, "python", tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.13"
	changed := metav1.Now().Rfc3339Copy() // as the transition times are stored: to the second
	if err := admin.Update(context.Background(), tpl); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Recreate members replaced", func() error {
		now, ready, err := poolMembers(ns, "recreate")
		if err != nil {
			return err
		}
		for _, m := range now {
			if m.Spec.PodTemplate.Spec.Containers[0].Image != "python:3.13" {
				return fmt.Errorf("member %s still runs %s", m.Name, m.Spec.PodTemplate.Spec.Containers[0].Image)
			}
		}
		if len(now) != 2 || ready != 2 {
			return fmt.Errorf("%d members, %d Ready", len(now), ready)
		}
		return nil
	})
	if got := names(waitPoolReady(t, ns, "replenish", 2)); !cmp.Equal(got, oldReplenish) {
		t.Errorf("OnReplenish members replaced: %v -> %v", oldReplenish, got)
	}

	// The rollout status: Recreate's members are all updated, and its Progressing condition went
	// through the rollout (True with MembersUpdated) and back to RolloutComplete since the change;
	// OnReplenish's rollout is complete with both members stale, and says they go as claimed.
	rollout := func(progressing string) []metav1.Condition {
		return []metav1.Condition{
			{Type: extv1beta1.SandboxWarmPoolAvailable, Status: metav1.ConditionTrue, Reason: extv1beta1.MinimumReplicasAvailableReason, Message: "2 of 2 members Ready", ObservedGeneration: 1},
			{Type: extv1beta1.SandboxWarmPoolProgressing, Status: metav1.ConditionFalse, Reason: extv1beta1.RolloutCompleteReason, Message: progressing, ObservedGeneration: 1},
		}
	}
	for name, want := range map[string]extv1beta1.SandboxWarmPoolStatus{
		"recreate": {UpdatedReplicas: 2, UpdatedReadyReplicas: 2, Conditions: rollout("Every member wanted exists and is Ready: 2 updated, 2 updated Ready, 2 desired")},
		"replenish": {Conditions: rollout("Every member wanted exists and is Ready: 0 updated, 0 updated Ready, 2 desired; " +
			"2 members are from an older template, replaced as they are claimed (updateStrategy OnReplenish)")},
	} {
		pool := &extv1beta1.SandboxWarmPool{}
		eventually(t, time.Minute, name+" rollout status", func() error {
			if err := get(ns, name, pool); err != nil {
				return err
			}
			got := extv1beta1.SandboxWarmPoolStatus{UpdatedReplicas: pool.Status.UpdatedReplicas, UpdatedReadyReplicas: pool.Status.UpdatedReadyReplicas, Conditions: pool.Status.Conditions}
			if diff := cmp.Diff(want, got, ignoreTransitionTimes); diff != "" {
				return fmt.Errorf("(-want +got):\n%s", diff)
			}
			return nil
		})
	}
	recreate := &extv1beta1.SandboxWarmPool{}
	if err := get(ns, "recreate", recreate); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(recreate.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing); c == nil || c.LastTransitionTime.Before(&changed) {
		t.Errorf("Recreate's Progressing condition did not go through the rollout after the change at %v: %+v", changed, c)
	}
}

// ignoreTransitionTimes compares conditions without their transition times, which are the
// controller's clock.
var ignoreTransitionTimes = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

// TestPoolProgressDeadline: members that never become Ready turn the pool's Progressing condition
// to ProgressDeadlineExceeded once the deadline passes, with no event but the pass the plan
// requeued for it (the member's Sandbox status waits for its startup window, and the pool's own
// write recheck comes after 30 s).
func TestPoolProgressDeadline(t *testing.T) {
	ns := newNamespace(t)
	startController(t, ns, controller.Options{})
	create(t, template(ns, "never", func(tpl *extv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "Pending"}
	}))
	create(t, warmPool(ns, "pool", "never", 2, func(p *extv1beta1.SandboxWarmPool) { p.Spec.ProgressDeadlineSeconds = ptr.To[int32](2) }))
	eventually(t, time.Minute, "2 members", func() error {
		if members, _, err := poolMembers(ns, "pool"); err != nil || len(members) != 2 {
			return fmt.Errorf("%d members (%v)", len(members), err)
		}
		return nil
	})
	pool := &extv1beta1.SandboxWarmPool{}
	eventually(t, 20*time.Second, "ProgressDeadlineExceeded", func() error {
		if err := get(ns, "pool", pool); err != nil {
			return err
		}
		c := meta.FindStatusCondition(pool.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != extv1beta1.ProgressDeadlineExceededReason {
			return fmt.Errorf("Progressing %+v", c)
		}
		if !strings.Contains(c.Message, "is not Ready after progressDeadlineSeconds (2): 2 updated, 0 updated Ready, 2 desired") {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	if pool.Status.UpdatedReplicas != 2 || pool.Status.UpdatedReadyReplicas != 0 || meta.IsStatusConditionTrue(pool.Status.Conditions, extv1beta1.SandboxWarmPoolAvailable) {
		t.Errorf("status %+v", pool.Status)
	}
}

// TestPoolTakesInOrphans: Sandboxes a GitOps tool applied from the render (no owner reference:
// Git has no UIDs) are taken into the pool instead of duplicated; a stale orphan is deleted.
func TestPoolTakesInOrphans(t *testing.T) {
	ns := newNamespace(t)
	create(t, template(ns, "python"))
	pool := warmPool(ns, "pool", "python", 2)
	create(t, pool)
	tpl := &extv1beta1.SandboxTemplate{}
	if err := get(ns, "python", tpl); err != nil {
		t.Fatal(err)
	}
	out, err := render.Render(&render.Input{Templates: []*extv1beta1.SandboxTemplate{stripped(tpl)}, Pools: []*extv1beta1.SandboxWarmPool{stripped(pool)}}, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fromGit []string
	for _, c := range out {
		if sb, ok := c.Object.(*agentsv1beta1.Sandbox); ok {
			create(t, sb.DeepCopy())
			fromGit = append(fromGit, sb.Name)
		}
	}
	stale := render.PoolSandbox(stripped(pool), tpl, "pool-stale", render.PoolHashes{PodTemplate: "x", Blueprint: "y"}, render.Options{})
	stale.Spec.PodTemplate.Spec.Containers[0].Image = "python:2.7"
	create(t, stale)

	startController(t, ns, controller.Options{})
	got := names(waitPoolReady(t, ns, "pool", 2))
	sort.Strings(fromGit)
	if !cmp.Equal(got, fromGit) {
		t.Errorf("members %v, want the ones applied from Git %v", got, fromGit)
	}
	eventually(t, time.Minute, "the stale orphan deleted", func() error { return notFound(ns, "pool-stale", &agentsv1beta1.Sandbox{}) })
}

// stripped is an object as it is in Git: no UID, resourceVersion or managedFields.
func stripped[T client.Object](o T) T {
	c := o.DeepCopyObject().(T)
	c.SetUID("")
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	c.SetCreationTimestamp(metav1.Time{})
	return c
}

func names(members []agentsv1beta1.Sandbox) []string {
	var out []string
	for _, m := range members {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// scaleClient is client-go's scale client, the one kubectl scale and the HPA use.
func scaleClient(t *testing.T) scale.ScalesGetter {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	sc, err := scale.NewForConfig(env.Config, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
