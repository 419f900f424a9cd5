package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/gitopshealth"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/poolwatch"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// testImageV2 is the test image again under a second name: a template change from testImage to
// it is an image change whose new Pods really start.
const testImageV2 = "sandbox-gitops.local/sandbox-testserver:e2e-v2"

// missingImage can never start, and a pull of it fails at once without leaving the machine:
// nothing listens on port 1 of the loopback address.
const missingImage = "127.0.0.1:1/missing:v1"

// rolloutNamespace holds the rollout checks' objects, which rolloutManager applies.
const (
	rolloutNamespace = "rollouts"
	rolloutManager   = "e2e-rollouts"
)

var (
	sandboxGVR  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	poolGVR     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// rolloutCase is one pool under one updateStrategy.
type rolloutCase struct {
	pool     string
	strategy map[string]any
}

// checkRollouts changes the image of each strategy's pool template on the real node and records
// the fewest Ready members each pool had while it went through the change; then it gives the
// RollingUpdate pool an image that can never start and checks that the rollout stops at its
// bound, turns Degraded in both GitOps health checks, and that the old members still serve
// claims; and that a claim whose Sandbox cannot pull its image says so, then says it is stuck.
func checkRollouts(t *testing.T, ctx context.Context, k *kube) {
	const replicas = 3
	cases := []rolloutCase{
		{"recreate", map[string]any{"type": "Recreate"}},
		{"onreplenish", map[string]any{"type": "OnReplenish"}},
		{"rolling", map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(1)}}},
	}
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rolloutNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, c := range cases {
		objs = append(objs, rolloutTemplate(c.pool, testImage), rolloutPool(c.pool, c.pool, replicas, c.strategy, 30))
	}
	k.apply(t, ctx, "the rollout pools", rolloutManager, objs)
	t.Cleanup(func() { k.deleteAll(t, context.Background(), objs) })
	for _, c := range cases {
		testenv.Eventually(t, timeout, "pool "+c.pool+" complete", func() error {
			return poolProgressing(ctx, k, c.pool, "False", "RolloutComplete", replicas, replicas)
		})
	}

	watches := map[string]*memberWatch{}
	for _, c := range cases {
		watches[c.pool] = watchMembers(t, ctx, k, c.pool)
		setTemplateImage(t, ctx, k, c.pool, testImageV2, "Never")
	}
	began := time.Now()
	for _, pool := range []string{"recreate", "rolling"} {
		testenv.Eventually(t, timeout, "pool "+pool+" rolled out to "+testImageV2, func() error {
			if err := poolProgressing(ctx, k, pool, "False", "RolloutComplete", replicas, replicas); err != nil {
				return err
			}
			return watches[pool].allOn(testImageV2, replicas)
		})
	}
	// OnReplenish keeps its members until they are claimed: nothing changes, and the status
	// says how many are stale.
	testenv.Eventually(t, timeout, "pool onreplenish reports its stale members", func() error {
		if err := poolProgressing(ctx, k, "onreplenish", "False", "RolloutComplete", replicas, 0); err != nil {
			return err
		}
		return watches["onreplenish"].allOn(testImage, replicas)
	})
	t.Logf("%-12s %-14s %s", "strategy", "fewest Ready", "most members")
	for _, c := range cases {
		minReady, maxAll := watches[c.pool].record()
		t.Logf("%-12s %-14d %d", c.strategy["type"], minReady, maxAll)
	}
	t.Logf("all three pools settled %v after the template change", time.Since(began).Round(time.Second))
	if minReady, _ := watches["recreate"].record(); minReady >= replicas {
		t.Errorf("Recreate kept %d Ready members; it deletes every idle member at once", minReady)
	}
	if minReady, maxAll := watches["onreplenish"].record(); minReady != replicas || maxAll != replicas {
		t.Errorf("OnReplenish went to %d Ready, %d members; it replaces a member only once claimed", minReady, maxAll)
	}
	if minReady, maxAll := watches["rolling"].record(); minReady < replicas-1 || maxAll > replicas+1 {
		t.Errorf("RollingUpdate (maxSurge 1, maxUnavailable 1) went to %d Ready, %d members; want at least %d and at most %d",
			minReady, maxAll, replicas-1, replicas+1)
	}

	t.Run("an image that never starts: the rollout stops at its bound and turns Degraded", func(t *testing.T) {
		w := watchMembers(t, ctx, k, "rolling")
		setTemplateImage(t, ctx, k, "rolling", missingImage, "IfNotPresent")
		testenv.Eventually(t, 2*timeout, "pool rolling past its progress deadline", func() error {
			return poolProgressing(ctx, k, "rolling", "False", "ProgressDeadlineExceeded", replicas-1, -1)
		})
		// Passes go on; the rollout does not.
		before := w.onImage(testImageV2)
		time.Sleep(10 * time.Second)
		if after := w.onImage(testImageV2); after != before || before < replicas-1 {
			t.Errorf("old members Ready: %d at the deadline, %d 10 s later; want them kept, at least %d", before, after, replicas-1)
		}
		minReady, maxAll := w.record()
		t.Logf("stuck rollout: fewest Ready %d, most members %d, %d old members Ready", minReady, maxAll, before)
		if minReady < replicas-1 || maxAll > replicas+1 {
			t.Errorf("went to %d Ready, %d members; want at least %d and at most %d", minReady, maxAll, replicas-1, replicas+1)
		}
		pool := getRollout(t, ctx, k, poolGVR, "rolling")
		wantHealth(t, pool, "Degraded", gitopshealth.Failed)

		claim := rolloutClaim("served", "rolling")
		k.apply(t, ctx, "a claim on the stuck pool", rolloutManager, []*unstructured.Unstructured{claim})
		testenv.Eventually(t, timeout, "claim served Ready", func() error { return claimReady(ctx, k, "served") })
		got := getRollout(t, ctx, k, claimGVR, "served")
		name, _, _ := unstructured.NestedString(got.Object, "status", "sandbox", "name")
		sb := getRollout(t, ctx, k, sandboxGVR, name)
		if img := containerImage(sb); img != testImageV2 {
			t.Errorf("claim served got Sandbox %s running %s, want a member of the old template (%s)", name, img, testImageV2)
		}
		wantHealth(t, got, "Healthy", gitopshealth.Current)
	})

	t.Run("a claim whose image cannot be pulled says why, then that it is stuck", func(t *testing.T) {
		config := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "render.sandbox-gitops.dev/v1alpha1", "kind": "SandboxRender",
			"metadata": map[string]any{"name": "render", "namespace": rolloutNamespace},
			"spec":     map[string]any{"claimReadyDeadlineSeconds": int64(20)},
		}}
		objs := []*unstructured.Unstructured{config, rolloutTemplate("broken", missingImage), rolloutPool("broken", "broken", 1, nil, 600), rolloutClaim("stuck", "broken")}
		setImagePullPolicy(objs[1], "IfNotPresent")
		k.apply(t, ctx, "a pool and a claim of an image that cannot be pulled", rolloutManager, objs)
		t.Cleanup(func() { k.deleteAll(t, context.Background(), objs) })
		var message string
		testenv.Eventually(t, timeout, "claim stuck names the pull failure", func() error {
			reason, msg, err := readyCondition(ctx, k, claimGVR, "stuck")
			if err != nil {
				return err
			}
			if reason != "DependenciesNotReady" || !(strings.Contains(msg, "ErrImagePull") || strings.Contains(msg, "ImagePullBackOff")) {
				return fmt.Errorf("Ready %s: %s", reason, msg)
			}
			message = msg
			return nil
		})
		t.Logf("claim stuck: %s", message)
		wantHealth(t, getRollout(t, ctx, k, claimGVR, "stuck"), "Progressing", gitopshealth.InProgress)
		testenv.Eventually(t, timeout, "claim stuck past claimReadyDeadlineSeconds", func() error {
			reason, msg, err := readyCondition(ctx, k, claimGVR, "stuck")
			if err != nil {
				return err
			}
			if reason != "ProgressDeadlineExceeded" {
				return fmt.Errorf("Ready %s: %s", reason, msg)
			}
			message = msg
			return nil
		})
		t.Logf("claim stuck: %s", message)
		wantHealth(t, getRollout(t, ctx, k, claimGVR, "stuck"), "Degraded", gitopshealth.Failed)
	})
}

// wantHealth judges a live object with the project's Argo CD and Flux health checks.
func wantHealth(t *testing.T, obj *unstructured.Unstructured, argo, flux string) {
	t.Helper()
	root := testenv.RepoRoot()
	a, err := gitopshealth.ArgoCDOf(root, obj)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gitopshealth.FluxOf(root, obj)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s: Argo CD %s (%s), Flux %s", obj.GetKind(), obj.GetName(), a.Status, a.Message, f)
	if a.Status != argo || f != flux {
		t.Errorf("%s %s: Argo CD %s, Flux %s; want %s, %s", obj.GetKind(), obj.GetName(), a.Status, f, argo, flux)
	}
}

func rolloutTemplate(name, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": rolloutNamespace},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{
				"name": "agent", "image": image, "imagePullPolicy": "Never", "env": testServerEnv(),
				"ports": []any{map[string]any{"containerPort": int64(8888)}},
			}},
		}}},
	}}
}

func setImagePullPolicy(tpl *unstructured.Unstructured, policy string) {
	containers, _, _ := unstructured.NestedSlice(tpl.Object, "spec", "podTemplate", "spec", "containers")
	containers[0].(map[string]any)["imagePullPolicy"] = policy
	_ = unstructured.SetNestedSlice(tpl.Object, containers, "spec", "podTemplate", "spec", "containers")
}

func rolloutPool(name, template string, replicas int64, strategy map[string]any, deadline int64) *unstructured.Unstructured {
	spec := map[string]any{"replicas": replicas, "sandboxTemplateRef": map[string]any{"name": template}, "progressDeadlineSeconds": deadline}
	if strategy != nil {
		spec["updateStrategy"] = strategy
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "namespace": rolloutNamespace},
		"spec":     spec,
	}}
}

func rolloutClaim(name, pool string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": rolloutNamespace},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": pool}},
	}}
}

// setTemplateImage changes the image (and pull policy) of a template's one container, as a
// pull request would.
func setTemplateImage(t *testing.T, ctx context.Context, k *kube, name, image, policy string) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/podTemplate/spec/containers/0/image","value":%q},`+
		`{"op":"replace","path":"/spec/podTemplate/spec/containers/0/imagePullPolicy","value":%q}]`, image, policy)
	if _, err := k.dyn.Resource(templateGVR).Namespace(rolloutNamespace).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("changing SandboxTemplate %s's image: %v", name, err)
	}
}

func getRollout(t *testing.T, ctx context.Context, k *kube, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := k.dyn.Resource(gvr).Namespace(rolloutNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// poolProgressing is nil once the pool's status is of its generation, its Progressing
// condition has the status and reason, it has at least ready Ready members and (unless
// updated is negative) exactly updated members of the current template.
func poolProgressing(ctx context.Context, k *kube, name, status, reason string, ready, updated int64) error {
	pool, err := k.dyn.Resource(poolGVR).Namespace(rolloutNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	observed, _, _ := unstructured.NestedInt64(pool.Object, "status", "observedGeneration")
	if observed != pool.GetGeneration() {
		return fmt.Errorf("status of generation %d, want %d", observed, pool.GetGeneration())
	}
	st, r, msg := condition(pool, "Progressing")
	gotReady, _, _ := unstructured.NestedInt64(pool.Object, "status", "readyReplicas")
	gotUpdated, _, _ := unstructured.NestedInt64(pool.Object, "status", "updatedReplicas")
	if st != status || r != reason || gotReady < ready || updated >= 0 && gotUpdated != updated {
		return fmt.Errorf("Progressing %s/%s (%s), %d Ready, %d updated", st, r, msg, gotReady, gotUpdated)
	}
	return nil
}

func condition(obj *unstructured.Unstructured, conditionType string) (status, reason, message string) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == conditionType {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

func readyCondition(ctx context.Context, k *kube, gvr schema.GroupVersionResource, name string) (reason, message string, err error) {
	obj, err := k.dyn.Resource(gvr).Namespace(rolloutNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	status, reason, message := condition(obj, "Ready")
	if status == "" {
		return "", "", errors.New("no Ready condition yet")
	}
	return reason, message, nil
}

func claimReady(ctx context.Context, k *kube, name string) error {
	obj, err := k.dyn.Resource(claimGVR).Namespace(rolloutNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if status, reason, message := condition(obj, "Ready"); status != "True" {
		return fmt.Errorf("Ready %s %s: %s", status, reason, message)
	}
	return nil
}

func containerImage(sb *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(sb.Object, "spec", "podTemplate", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	image, _ := containers[0].(map[string]any)["image"].(string)
	return image
}

// watchMembers follows the pool's members from now until the test ends (testkit/poolwatch).
func watchMembers(t *testing.T, ctx context.Context, k *kube, pool string) *memberWatch {
	t.Helper()
	res := k.dyn.Resource(sandboxGVR).Namespace(rolloutNamespace)
	list := func(ctx context.Context) ([]agentsv1beta1.Sandbox, string, error) {
		l := &agentsv1beta1.SandboxList{}
		err := k.c.List(ctx, l, client.InNamespace(rolloutNamespace))
		return l.Items, l.ResourceVersion, err
	}
	watchFrom := func(ctx context.Context, rv string) (watch.Interface, error) {
		return res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	}
	w, err := poolwatch.Start(ctx, pool, list, watchFrom)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &memberWatch{w}
}

// memberWatch is a pool's watch with the questions the rollout checks ask of its members.
type memberWatch struct{ *poolwatch.Watch }

func (w *memberWatch) record() (minReady, maxAll int) { return w.Record() }

// onImage counts the Ready members that run image.
func (w *memberWatch) onImage(image string) int {
	n := 0
	for _, sb := range w.Members() {
		if poolwatch.Ready(sb) && sb.Spec.PodTemplate.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

// allOn is nil once the pool has exactly n members, all Ready and running image.
func (w *memberWatch) allOn(image string, n int) error {
	members := w.Members()
	var errs []error
	for _, sb := range members {
		if img := sb.Spec.PodTemplate.Spec.Containers[0].Image; img != image || !poolwatch.Ready(sb) {
			errs = append(errs, fmt.Errorf("member %s runs %s, Ready %v", sb.Name, img, poolwatch.Ready(sb)))
		}
	}
	if len(members) != n {
		errs = append(errs, fmt.Errorf("%d members, want %d", len(members), n))
	}
	return errors.Join(errs...)
}
