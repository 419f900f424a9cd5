package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/bundle"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

const gitopsManifests = `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: notebook
spec:
  podTemplate:
    metadata:
      labels:
        app: notebook
    spec:
      containers:
      - name: jupyter
        image: jupyter/base-notebook
        ports:
        - containerPort: 8888
  service: true
  volumeClaimTemplates:
  - metadata:
      name: work
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
`

// TestGitOpsAppliedChildrenConverge is the GitOps case: a GitOps tool (field manager "argocd")
// already applied the function's whole output, children included. The controller adopts those
// children (they carry their name-hash labels, or select the template's pods) with forced
// applies, without conflicts; after that a second pass writes nothing, and the GitOps tool can
// apply the same output again without conflicts either.
func TestGitOpsAppliedChildrenConverge(t *testing.T) {
	ns := newNamespace(t)
	objs, err := manifest.Parse("gitops.yaml", []byte(gitopsManifests))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
	}
	out, err := bundle.Expand(objs, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	applyAll := func(force bool) error {
		for _, o := range out {
			opts := []client.ApplyOption{client.FieldOwner("argocd")}
			if force {
				opts = append(opts, client.ForceOwnership)
			}
			if err := admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
		return nil
	}
	if err := applyAll(true); err != nil {
		t.Fatal(err)
	}
	startController(t, ns, controller.Options{})
	sb := waitReady(t, ns, "notebook", metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady)
	for _, o := range out {
		if o.GetKind() == "Sandbox" || o.GetKind() == "SandboxTemplate" {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		// The template's NetworkPolicy is a background pass (render.Plan.Background): the gate
		// may hold it behind the Sandbox's own writes, at most the background hold.
		eventually(t, controller.DefaultBackgroundHold+10*time.Second, fmt.Sprintf("%s %s adopted", o.GetKind(), o.GetName()), func() error {
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
				return err
			}
			if metav1.GetControllerOf(live) == nil {
				return fmt.Errorf("%s %s has no controller", o.GetKind(), o.GetName())
			}
			return nil
		})
		ref := metav1.GetControllerOf(live)
		if ref == nil {
			t.Errorf("%s %s was not adopted", o.GetKind(), o.GetName())
		} else if o.GetKind() != "NetworkPolicy" && ref.UID != sb.UID {
			t.Errorf("%s %s adopted by %+v, want the Sandbox", o.GetKind(), o.GetName(), ref)
		}
		if diff := subsetDiff(o.GetKind(), withoutOwners(o), live.Object); len(diff) > 0 {
			t.Errorf("%s %s differs from the function's output: %v", o.GetKind(), o.GetName(), diff)
		}
	}
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("%d Pods, want the one the GitOps tool applied", len(pods.Items))
	}

	settle(t, 15*time.Second)
	before := writeCounts(t)
	// Touch the Sandbox so it is reconciled again.
	stored := &agentsv1beta1.Sandbox{}
	if err := get(ns, "notebook", stored); err != nil {
		t.Fatal(err)
	}
	orig := stored.DeepCopy()
	stored.Annotations = map[string]string{"touched": "yes"}
	if err := admin.Patch(context.Background(), stored, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	n, by := controllerWrites(before, writeCounts(t))
	if by["sandboxes PATCH"]--; by["sandboxes PATCH"] == 0 {
		delete(by, "sandboxes PATCH")
	}
	if n-1 != 0 {
		t.Errorf("a second pass wrote: %v", by)
	}
	// The GitOps tool re-syncs without forcing: no conflicts with the controller.
	if err := applyAll(false); err != nil {
		t.Errorf("the GitOps tool's next sync conflicts with the controller: %v", err)
	}
}

func withoutOwners(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "ownerReferences")
	return c.Object
}
