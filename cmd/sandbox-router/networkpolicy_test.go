package main

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/policies"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestNetworkPolicyAdmitsRouter: the router pods bases/router deploys are admitted by the
// secure-default NetworkPolicy every SandboxTemplate gets (policies, zero knobs = upstream's
// peer), and the Service the SDKs call selects them. If either side's labels or namespace
// change, sandboxes become unreachable; this fails first.
func TestNetworkPolicyAdmitsRouter(t *testing.T) {
	built := kustomizeBuild(t, filepath.Join(testenv.RepoRoot(), "bases", "router"))
	pod := routerPodLabels(t, built)
	// What the API server puts on every namespace (checked against a real one in
	// TestAgainstAPIServer/base).
	nsLabels := map[string]string{"kubernetes.io/metadata.name": pod.namespace}
	checkPeerSelects(t, nsLabels, pod)

	objs, err := manifest.Parse("bases/router", built)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &svc); err != nil {
			t.Fatal(err)
		}
		if svc.Name == "sandbox-router-svc" && svc.Namespace == pod.namespace && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.labels)) {
			found = true
		}
	}
	if !found {
		t.Errorf("no Service sandbox-router-svc in %s selecting the router pods %v", pod.namespace, pod.labels)
	}
}

type routerPod struct {
	namespace string
	labels    map[string]string
}

func routerPodLabels(t *testing.T, built []byte) routerPod {
	t.Helper()
	objs, err := manifest.Parse("bases/router", built)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "sandbox-router" {
			l, _, _ := unstructuredStringMap(o.Object, "spec", "template", "metadata", "labels")
			return routerPod{namespace: o.GetNamespace(), labels: l}
		}
	}
	t.Fatal("bases/router has no Deployment sandbox-router")
	return routerPod{}
}

func unstructuredStringMap(obj map[string]any, path ...string) (map[string]string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out, true, nil
}

// checkPeerSelects: some ingress peer of the default policy selects both the namespace (by
// its labels) and the pod (by its labels); a peer with both selectors requires both.
func checkPeerSelects(t *testing.T, nsLabels map[string]string, pod routerPod) {
	t.Helper()
	spec := policies.NetworkPolicyDefaults{}.DefaultSpec(map[string]string{agentsv1beta1.SandboxTemplateRefHashLabel: "69155462"})
	if len(spec.Ingress) != 1 {
		t.Fatalf("default policy has %d ingress rules, want 1", len(spec.Ingress))
	}
	for _, peer := range spec.Ingress[0].From {
		if peer.NamespaceSelector == nil || peer.PodSelector == nil {
			continue
		}
		nsSel, err1 := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		podSel, err2 := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if nsSel.Matches(labels.Set(nsLabels)) && podSel.Matches(labels.Set(pod.labels)) {
			return
		}
	}
	t.Errorf("no ingress peer of the default NetworkPolicy %+v selects the router pods %v in namespace %s (labels %v)",
		spec.Ingress[0].From, pod.labels, pod.namespace, nsLabels)
}
