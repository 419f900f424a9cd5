package webhook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/api/convert"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// TestV1alpha1SeedsThroughTheAPIServer: every v1alpha1 object of the golden render inputs (the
// upstream guides' manifests among them) is created with a v1alpha1 client while the webhook
// runs. Read as v1alpha1 it holds everything that was sent; read as v1beta1 it is what the
// render makes of the same YAML (manifest.Decode, so preview == reality for v1alpha1 sources);
// an update through v1alpha1 changes only what it changed.
func TestV1alpha1SeedsThroughTheAPIServer(t *testing.T) {
	startWebhook(t, &webhook.Options{Hosts: []string{"127.0.0.1"}}, "")
	ctx := context.Background()
	dirs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "golden", "testdata", "render", "*"))
	if err != nil {
		t.Fatal(err)
	}
	seeds := 0
	for _, dir := range dirs {
		if strings.HasPrefix(filepath.Base(dir), "err-") {
			continue
		}
		for _, sent := range v1alpha1Inputs(t, dir) {
			seeds++
			name := filepath.Base(dir) + "/" + sent.GetKind() + "/" + sent.GetName()
			t.Run(name, func(t *testing.T) {
				sent.SetNamespace(newNamespace(t))
				if err := admin.Create(ctx, sent.DeepCopy()); err != nil {
					t.Fatalf("creating it as v1alpha1: %v", err)
				}
				alpha := get(t, sent, sent.GetAPIVersion())
				for _, p := range missing(canonical(t, sent).Object, alpha.Object, "") {
					t.Errorf("read as v1alpha1, %s", p)
				}
				for _, p := range emptyExtras(sent.Object["spec"], alpha.Object["spec"], ".spec") {
					t.Errorf("read as v1alpha1, %s", p)
				}
				if a := alpha.GetAnnotations(); a[convert.V1alpha1Annotation] != "" || a[convert.V1beta1Annotation] != "" {
					t.Errorf("read as v1alpha1 it shows the conversion's bookkeeping: %v", a)
				}

				beta := get(t, sent, v1beta1Of(sent))
				decoded, err := manifest.Decode([]*unstructured.Unstructured{sent.DeepCopy()})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(specOf(t, decodedObject(decoded)), specOf(t, beta)); diff != "" {
					t.Errorf("stored as v1beta1, the spec differs from the render's conversion (-render +cluster):\n%s", diff)
				}
				// Only what v1beta1 cannot say is kept, so only claims with a policy or template
				// their pool does not imply carry the annotation.
				kept := beta.GetAnnotations()[convert.V1alpha1Annotation]
				if diff := cmp.Diff(decodedObject(decoded).(metav1.Object).GetAnnotations()[convert.V1alpha1Annotation], kept); diff != "" {
					t.Errorf("stored as v1beta1, the kept v1alpha1 values differ from the render's (-render +cluster):\n%s", diff)
				}
				if kept != "" && sent.GetKind() != "SandboxClaim" {
					t.Errorf("a %s keeps v1alpha1 values: %s", sent.GetKind(), kept)
				}

				alpha.SetLabels(map[string]string{"edited": "through-v1alpha1"})
				if err := admin.Update(ctx, alpha); err != nil {
					t.Fatalf("updating it as v1alpha1: %v", err)
				}
				if diff := cmp.Diff(specOf(t, beta), specOf(t, get(t, sent, v1beta1Of(sent)))); diff != "" {
					t.Errorf("a v1alpha1 update of a label changed the stored spec (-before +after):\n%s", diff)
				}
				for _, p := range missing(canonical(t, sent).Object["spec"], get(t, sent, sent.GetAPIVersion()).Object["spec"], ".spec") {
					t.Errorf("after the update, read as v1alpha1, %s", p)
				}
			})
		}
	}
	if seeds < 10 {
		t.Errorf("only %d v1alpha1 objects in the golden inputs; expected at least 10", seeds)
	}
}

// TestV1alpha1UpdateKeepsV1beta1Fields: objects created as v1beta1 with fields v1alpha1 has no
// place for, read and written back whole through v1alpha1 (as kubectl edit does), keep them.
func TestV1alpha1UpdateKeepsV1beta1Fields(t *testing.T) {
	startWebhook(t, &webhook.Options{Hosts: []string{"127.0.0.1"}}, "")
	ctx := context.Background()
	ns := newNamespace(t)
	podTemplate := agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "python", Image: "python:3.12"}}}}
	vct := []agentsv1beta1.PersistentVolumeClaimTemplate{{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	cases := map[string]struct {
		reason string
		beta   client.Object
		alpha  client.Object
		// status is written through the v1beta1 status subresource after creation.
		status func(client.Object)
	}{
		"claim": {
			reason: "a claim's volumeClaimTemplates, and a pool that is not the shadow of its template",
			beta: &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: ns},
				Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "shadow-pool-python"}, VolumeClaimTemplates: vct}},
			alpha: &extv1alpha1.SandboxClaim{},
			status: func(o client.Object) {
				o.(*extv1beta1.SandboxClaim).Status.SandboxStatus.Name = "python-pool-x7k2p" // a warm Sandbox
			},
		},
		"template": {
			reason: "a template's volumeClaimTemplatesPolicy",
			beta: &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "template", Namespace: ns},
				Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: podTemplate, VolumeClaimTemplates: vct},
					VolumeClaimTemplatesPolicy: extv1beta1.VolumeClaimTemplatesPolicyOverrides}},
			alpha: &extv1alpha1.SandboxTemplate{},
		},
		"sandbox": {
			reason: "a Sandbox's status.nodeName",
			beta: &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: ns},
				Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: podTemplate},
					OperatingMode: agentsv1beta1.SandboxOperatingModeSuspended}},
			alpha: &agentsv1alpha1.Sandbox{},
			status: func(o client.Object) {
				o.(*agentsv1beta1.Sandbox).Status.NodeName = "node-1"
			},
		},
		"pool": {
			reason: "a pool's status.observedGeneration",
			beta: &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: ns},
				Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](3), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "python"}}},
			alpha: &extv1alpha1.SandboxWarmPool{},
			status: func(o client.Object) {
				o.(*extv1beta1.SandboxWarmPool).Status.ObservedGeneration = 1
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := admin.Create(ctx, tc.beta); err != nil {
				t.Fatal(err)
			}
			if tc.status != nil {
				tc.status(tc.beta)
				if err := admin.Status().Update(ctx, tc.beta); err != nil {
					t.Fatal(err)
				}
			}
			before := tc.beta.DeepCopyObject().(client.Object)
			if err := admin.Get(ctx, client.ObjectKeyFromObject(tc.beta), before); err != nil {
				t.Fatal(err)
			}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(tc.beta), tc.alpha); err != nil {
				t.Fatalf("reading it as v1alpha1: %v", err)
			}
			tc.alpha.SetLabels(map[string]string{"edited": "through-v1alpha1"})
			if err := admin.Update(ctx, tc.alpha); err != nil {
				t.Fatalf("updating it as v1alpha1: %v", err)
			}
			if tc.status != nil {
				// The status subresource too: a v1alpha1 status write keeps v1beta1's status.
				if err := admin.Status().Update(ctx, tc.alpha); err != nil {
					t.Fatalf("updating its status as v1alpha1: %v", err)
				}
			}
			after := tc.beta.DeepCopyObject().(client.Object)
			if err := admin.Get(ctx, client.ObjectKeyFromObject(tc.beta), after); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(content(t, before), content(t, after)); diff != "" {
				t.Errorf("%s did not survive a v1alpha1 update (-before +after):\n%s", tc.reason, diff)
			}
			if got := after.GetLabels()["edited"]; got != "through-v1alpha1" {
				t.Errorf("the v1alpha1 update itself was lost: labels %v", after.GetLabels())
			}
		})
	}
}

// v1alpha1Inputs are the v1alpha1 objects among a golden case's inputs, as a user would
// kubectl apply them (no server-owned metadata).
func v1alpha1Inputs(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		if b := filepath.Base(f); b == "expected.yaml" || b == "config.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Parse(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if manifest.IsAgentSandbox(o) && convert.IsV1alpha1(o.GetAPIVersion()) {
				o.SetUID("")
				o.SetOwnerReferences(nil)
				delete(o.Object, "status")
				out = append(out, o)
			}
		}
	}
	return out
}

func get(t *testing.T, like *unstructured.Unstructured, apiVersion string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(like.GetKind())
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(like), u); err != nil {
		t.Fatalf("reading %s %s as %s: %v", like.GetKind(), like.GetName(), apiVersion, err)
	}
	return u
}

func v1beta1Of(u *unstructured.Unstructured) string {
	return schema.GroupVersion{Group: u.GroupVersionKind().Group, Version: "v1beta1"}.String()
}

// canonical passes an object through its Go type, as the webhook does: quantities in canonical
// form (1024Mi is 1Gi), numbers typed. Those are the only changes a typed conversion makes.
func canonical(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	obj, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// emptyExtras lists the empty objects in got where want has nothing: what a conversion adds by
// marshalling a zero struct (additionalPodMetadata: {}), which the sender never wrote and a
// GitOps diff would show.
func emptyExtras(want, got any, path string) []string {
	g, ok := got.(map[string]any)
	if !ok {
		return nil
	}
	w, _ := want.(map[string]any)
	var out []string
	for k, v := range g {
		// podTemplate.metadata is marshalled as upstream's types marshal it, {} when empty:
		// upstream's pod-template hash is computed over that JSON, and ours must equal it.
		if path+"."+k == ".spec.podTemplate.metadata" {
			continue
		}
		if m, isMap := v.(map[string]any); isMap && len(m) == 0 && w[k] == nil {
			out = append(out, fmt.Sprintf("%s.%s: {}, which was not sent", path, k))
			continue
		}
		out = append(out, emptyExtras(w[k], v, path+"."+k)...)
	}
	return out
}

// missing lists every value of want that got lacks or holds differently; got may hold more
// (the defaults the server applied).
func missing(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var out []string
		for k, v := range w {
			switch {
			case path == "" && k == "status":
				continue
			case path == "" && k == "metadata":
				md, _ := v.(map[string]any)
				v = map[string]any{"labels": md["labels"], "annotations": md["annotations"]}
			case v == nil:
				continue
			}
			out = append(out, missing(v, g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		return nil
	}
}

func decodedObject(b *manifest.Bundle) runtime.Object {
	switch {
	case len(b.Sandboxes) == 1:
		return b.Sandboxes[0]
	case len(b.Templates) == 1:
		return b.Templates[0]
	case len(b.Claims) == 1:
		return b.Claims[0]
	default:
		return b.Pools[0]
	}
}

// specOf is an object's spec through its Go type.
func specOf(t *testing.T, obj runtime.Object) any {
	t.Helper()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return canonical(t, u).Object["spec"]
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m["spec"]
}

// content is what a user wrote and the controller reported: spec, status, labels and
// annotations other than the test's edit.
func content(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for k, v := range obj.GetLabels() {
		if k != "edited" {
			labels[k] = v
		}
	}
	return map[string]any{"spec": m["spec"], "status": m["status"], "labels": labels, "annotations": obj.GetAnnotations()}
}
