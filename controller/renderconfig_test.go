package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/krm"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// functionOutput is what the KRM function writes for the gitops manifests in namespace ns with
// the functionConfig config: the tree's preview, its SandboxRender copy included.
func functionOutput(t *testing.T, ns, config string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Parse("gitops.yaml", []byte(gitopsManifests))
	if err != nil {
		t.Fatal(err)
	}
	var items []*kyaml.RNode
	for _, o := range objs {
		o.SetNamespace(ns)
		n, err := kyaml.FromMap(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, n)
	}
	fc, err := kyaml.Parse(config)
	if err != nil {
		t.Fatal(err)
	}
	out, results, err := krm.Transform(items, fc)
	if err != nil || results.ExitCode() != 0 {
		t.Fatalf("the function: %v %v", err, results)
	}
	var rendered []*unstructured.Unstructured
	for _, o := range out {
		u := o.Object
		if o.Node != nil {
			if u, err = manifest.NodeObject(o.Node.YNode()); err != nil {
				t.Fatal(err)
			}
		}
		rendered = append(rendered, u)
	}
	return rendered
}

// applyAs server-side applies objs as a GitOps tool's field manager.
func applyAs(manager string, objs []*unstructured.Unstructured, force bool) error {
	for _, o := range objs {
		opts := []client.ApplyOption{client.FieldOwner(manager)}
		if force {
			opts = append(opts, client.ForceOwnership)
		}
		if err := admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			return fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// waitRenderReady waits for a SandboxRender's Ready condition to say status for reason, at
// its current generation, and returns the message.
func waitRenderReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	eventually(t, time.Minute, fmt.Sprintf("SandboxRender %s/%s Ready=%s/%s", ns, name, status, reason), func() error {
		sr := &renderv1alpha1.SandboxRender{}
		if err := get(ns, name, sr); err != nil {
			return err
		}
		c := meta.FindStatusCondition(sr.Status.Conditions, renderv1alpha1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || sr.Status.ObservedGeneration != sr.Generation || c.ObservedGeneration != sr.Generation {
			return fmt.Errorf("generation %d, status %+v", sr.Generation, sr.Status)
		}
		msg = c.Message
		return nil
	})
	return msg
}

// hasDNSEgress reports whether a template's NetworkPolicy lets its pods reach cluster DNS.
func hasDNSEgress(np *networkingv1.NetworkPolicy) bool {
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			if p.Port != nil && p.Port.IntValue() == 53 {
				for _, to := range e.To {
					if to.NamespaceSelector != nil {
						return true
					}
				}
			}
		}
	}
	return false
}

// TestRenderConfigPerNamespace is the promise across trees: two trees with different render
// configs, each applied by a GitOps tool with the SandboxRender its function wrote, are served
// by one controller whose own default differs from both. Each namespace is rendered as its
// preview showed; the GitOps tool re-syncs both without a conflict; a change of one config
// re-renders its namespace only; an invalid or a second config leaves the namespace's objects as
// they were and says why on the config, naming the field.
func TestRenderConfigPerNamespace(t *testing.T) {
	dnsTree, plainTree := newNamespace(t), newNamespace(t)
	const dnsConfig = "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: render\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  policies:\n    networkPolicy:\n      dns: cluster-dns\n"
	const plainConfig = "apiVersion: render.sandbox-gitops.dev/v1alpha1\nkind: SandboxRender\nmetadata:\n  name: render\n"
	trees := map[string][]*unstructured.Unstructured{
		dnsTree:   functionOutput(t, dnsTree, dnsConfig),
		plainTree: functionOutput(t, plainTree, plainConfig),
	}
	for ns, out := range trees {
		if !slices.ContainsFunc(out, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "SandboxRender" && o.GetNamespace() == ns
		}) {
			t.Fatalf("the function's output for %s has no SandboxRender", ns)
		}
		if err := applyAs("argocd", out, true); err != nil {
			t.Fatal(err)
		}
	}
	// The controller's own default (--render-config) differs from both trees': a namespace
	// with its SandboxRender is rendered with that alone.
	startControllerIn(t, []string{dnsTree, plainTree}, controller.Options{Render: render.Options{ClusterDomain: "fallback.example"}})
	for ns := range trees {
		msg := waitRenderReady(t, ns, "render", metav1.ConditionTrue, renderv1alpha1.ReasonInForce)
		if want := "generation 1 renders the agent-sandbox objects of namespace " + ns; msg != want {
			t.Errorf("%s: Ready message %q, want %q", ns, msg, want)
		}
		sb := waitReady(t, ns, "notebook", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
		if want := "notebook." + ns + ".svc.cluster.local"; sb.Status.ServiceFQDN != want {
			t.Errorf("%s: serviceFQDN %q, want %q (the tree's config, not the controller's default)", ns, sb.Status.ServiceFQDN, want)
		}
	}
	policy := func(ns string) *networkingv1.NetworkPolicy {
		np := &networkingv1.NetworkPolicy{}
		if err := get(ns, render.NetworkPolicyName("python"), np); err != nil {
			t.Fatal(err)
		}
		return np
	}
	eventually(t, time.Minute, "each template's policy as its tree's preview shows it", func() error {
		var problems []string
		for ns, out := range trees {
			for _, o := range out {
				if o.GetKind() != "NetworkPolicy" {
					continue
				}
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(o.GroupVersionKind())
				if err := admin.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
					return err
				}
				problems = append(problems, subsetDiff(ns+"/"+o.GetName(), withoutOwners(o), live.Object)...)
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s", strings.Join(problems, "\n"))
		}
		return nil
	})
	if !hasDNSEgress(policy(dnsTree)) || hasDNSEgress(policy(plainTree)) {
		t.Fatalf("cluster DNS egress: %v in the cluster-dns tree, %v in the plain one; want true, false", hasDNSEgress(policy(dnsTree)), hasDNSEgress(policy(plainTree)))
	}
	settle(t, 15*time.Second)
	// The GitOps tool's next sync of each tree, without force: no conflict with the controller.
	for ns, out := range trees {
		if err := applyAs("argocd", out, false); err != nil {
			t.Errorf("re-syncing %s conflicts with the controller: %v", ns, err)
		}
	}

	// A change of the cluster-dns tree's config re-renders that namespace, and no other.
	plainBefore := policy(plainTree).ResourceVersion
	patchSpec := func(ns, name, spec string) {
		t.Helper()
		sr := &renderv1alpha1.SandboxRender{}
		if err := get(ns, name, sr); err != nil {
			t.Fatal(err)
		}
		if err := admin.Patch(context.Background(), sr, client.RawPatch("application/merge-patch+json", []byte(`{"spec":`+spec+`}`))); err != nil {
			t.Fatal(err)
		}
	}
	patchSpec(dnsTree, "render", `{"policies":{"networkPolicy":{"dns":"public-resolvers"}}}`)
	waitRenderReady(t, dnsTree, "render", metav1.ConditionTrue, renderv1alpha1.ReasonInForce)
	eventually(t, time.Minute, "the policy re-rendered without cluster DNS", func() error {
		if hasDNSEgress(policy(dnsTree)) {
			return fmt.Errorf("still allows cluster DNS")
		}
		return nil
	})
	settle(t, 15*time.Second)
	if rv := policy(plainTree).ResourceVersion; rv != plainBefore {
		t.Errorf("the other namespace's policy was written (resourceVersion %s, was %s)", rv, plainBefore)
	}

	// An invalid config: the condition names the field, and nothing of the namespace changes,
	// not even for a Sandbox created meanwhile.
	dnsBefore := policy(dnsTree).ResourceVersion
	patchSpec(dnsTree, "render", `{"policies":{"networkPolicy":{"dns":"quad9"}}}`)
	msg := waitRenderReady(t, dnsTree, "render", metav1.ConditionFalse, renderv1alpha1.ReasonInvalid)
	if want := `spec.policies.networkPolicy.dns: Unsupported value: "quad9"`; !strings.Contains(msg, want) {
		t.Errorf("Invalid message %q does not name the field (%s)", msg, want)
	}
	late := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: dnsTree, Name: "late"}}
	late.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "a", Image: "a:1"}}
	if err := admin.Create(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	settle(t, 10*time.Second)
	if rv := policy(dnsTree).ResourceVersion; rv != dnsBefore {
		t.Errorf("under an invalid config the policy was written (resourceVersion %s, was %s)", rv, dnsBefore)
	}
	if err := get(dnsTree, "late", &corev1.Pod{}); err == nil || !apierrors.IsNotFound(err) {
		t.Errorf("under an invalid config a Pod was made for a new Sandbox (%v)", err)
	}
	// Fixed, the namespace is rendered again, the new Sandbox included.
	patchSpec(dnsTree, "render", `{"policies":{"networkPolicy":{"dns":"cluster-dns"}}}`)
	waitRenderReady(t, dnsTree, "render", metav1.ConditionTrue, renderv1alpha1.ReasonInForce)
	waitReady(t, dnsTree, "late", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	eventually(t, time.Minute, "the policy re-rendered with cluster DNS", func() error {
		if !hasDNSEgress(policy(dnsTree)) {
			return fmt.Errorf("no cluster DNS egress")
		}
		return nil
	})

	// A second config in one namespace: both say so; deleting it puts the first back in force.
	second := &unstructured.Unstructured{Object: map[string]any{"apiVersion": renderv1alpha1.GroupVersion.String(), "kind": "SandboxRender",
		"metadata": map[string]any{"name": "second", "namespace": plainTree}}}
	if err := admin.Create(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"render", "second"} {
		msg := waitRenderReady(t, plainTree, name, metav1.ConditionFalse, renderv1alpha1.ReasonConflict)
		if want := "namespace " + plainTree + " has 2 SandboxRenders (render, second)"; !strings.Contains(msg, want) {
			t.Errorf("%s: Conflict message %q, want it to say %q", name, msg, want)
		}
	}
	if err := admin.Delete(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	waitRenderReady(t, plainTree, "render", metav1.ConditionTrue, renderv1alpha1.ReasonInForce)
}
