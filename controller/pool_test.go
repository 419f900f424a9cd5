package controller_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"
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
		want := extv1beta1.SandboxWarmPoolStatus{Replicas: 3, ReadyReplicas: 3, Selector: agentsv1beta1.SandboxWarmPoolLabel + "=" + render.NameHash("pool"), ObservedGeneration: pool.Generation}
		if diff := cmp.Diff(want, pool.Status); diff != "" {
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
