package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
	"github.com/sandbox-gitops/sandbox-gitops/webhook/certs"
)

const (
	// controllerName is the controller's Deployment and ServiceAccount in webhook.DefaultNamespace.
	controllerName = "sandbox-gitops-controller"
	// routerNamespace and routerName are where router.yaml puts the router: upstream's
	// namespace, which router.yaml does not hold (applyRouter creates it first).
	routerNamespace, routerName = "agent-sandbox-system", "sandbox-router"
	// exampleNamespace is docs/example's namespace (its kustomization sets it).
	exampleNamespace = "team-a"
	// installManager applies the release, as `kubectl apply --server-side` names itself;
	// gitopsManager applies docs/example, as a GitOps tool would.
	installManager, gitopsManager = "kubectl", "e2e-gitops"
	// timeout bounds each wait; on kwok a Pod is Running within a second of being scheduled.
	timeout = 2 * time.Minute
)

// ourGroups are the API groups of our CRDs.
var ourGroups = []string{agentsv1beta1.GroupVersion.Group, extv1beta1.GroupVersion.Group}

// environment is what differs between the clusters the body runs on: where the controller runs.
type environment interface {
	// installed runs once install.yaml is applied, before the controller starts.
	installed(t *testing.T, ctx context.Context, k *kube, r *release)
	// start starts the controller, or waits for it, and returns once it is ready.
	start(t *testing.T, ctx context.Context, k *kube)
	// kill stops the controller abruptly, as a crash or a lost node does.
	kill(t *testing.T, ctx context.Context, k *kube)
	// stop stops the controller for good, before the uninstall.
	stop(t *testing.T, ctx context.Context, k *kube)
}

// runsSandboxes is an environment whose sandboxes really run (the real node): it points the
// example at an image it has, and checks the running sandboxes once the example converged.
type runsSandboxes interface {
	example(t *testing.T, objs []*unstructured.Unstructured)
	converged(t *testing.T, ctx context.Context, k *kube)
}

// testInstall is the e2e body: a user's install, use and uninstall of the release r on the
// cluster admin reaches, with the controller where env runs it.
func testInstall(t *testing.T, ctx context.Context, admin *rest.Config, r *release, env environment) {
	k := newKube(t, admin)
	began := time.Now()
	step := func(what string) { t.Logf("%6.1fs  %s", time.Since(began).Seconds(), what) }

	step("the release pins every image to the digest of the index in dist/images")
	checkPins(t, r)

	step("server-side apply install.yaml and router.yaml: no warnings")
	k.apply(t, ctx, "install.yaml", installManager, r.install)
	testenv.Eventually(t, timeout, "every CRD established", func() error { return crdsEstablished(ctx, k, r.install) })
	applyRouter(t, ctx, k, r)
	testenv.Eventually(t, timeout, "the router's Deployment available", func() error {
		return k.deploymentAvailable(ctx, routerNamespace, routerName)
	})
	env.installed(t, ctx, k, r)

	step("start the controller")
	env.start(t, ctx, k)

	step("the webhook's CA is every CRD's caBundle")
	testenv.Eventually(t, timeout, "caBundle set", func() error { return caBundlesSet(ctx, k, r.install) })

	step("apply docs/example: every claim Ready, the pool full")
	example := readExample(t)
	running, real := env.(runsSandboxes)
	if real {
		running.example(t, example)
	}
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exampleNamespace}}); err != nil {
		t.Fatal(err)
	}
	k.apply(t, ctx, "docs/example", gitopsManager, example)
	var claims []string
	for _, o := range example {
		if o.GetKind() == "SandboxClaim" {
			claims = append(claims, o.GetName())
		}
	}
	testenv.Eventually(t, timeout, "docs/example converged", func() error {
		return errors.Join(claimsReady(ctx, k, claims), poolFull(ctx, k, "python"))
	})

	if real {
		step("the sandboxes run: traffic through the router, a volume across suspend and resume")
		running.converged(t, ctx, k)
	}

	step("a v1alpha1 claim round-trips through the webhook")
	checkV1alpha1RoundTrip(t, ctx, k)
	claims = append(claims, "carol")

	step("restart the controller mid-way: nothing lost, nothing duplicated")
	claims = restartMidway(t, ctx, k, env, claims)

	step("delete a claim with DeleteForeground: its Sandbox's children go through the garbage collector")
	checkForegroundDelete(t, ctx, k, "alice")

	step("uninstall: delete router.yaml and install.yaml, and nothing of ours is left")
	env.stop(t, ctx, k)
	k.deleteAll(t, ctx, r.router)
	k.deleteAll(t, ctx, r.install)
	testenv.Eventually(t, timeout, "every object of the release gone", func() error {
		return k.gone(ctx, append(slices.Clone(r.install), r.router...))
	})
	testenv.Eventually(t, timeout, "nothing of ours left", func() error { return leftovers(ctx, k) })
	// The router's namespace is upstream's, and may hold upstream's controller: deleting
	// router.yaml leaves it.
	if ns, err := k.cs.CoreV1().Namespaces().Get(ctx, routerNamespace, metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("namespace %s did not outlive router.yaml (error %v)", routerNamespace, err)
	}
	step("done")
}

// applyRouter applies router.yaml as the README and its header say: its namespace first, which
// the file does not hold, as `kubectl create namespace agent-sandbox-system --dry-run=client -o
// yaml | kubectl apply --server-side -f -` sends it (idempotent: a no-op where upstream's
// install made it), then the file.
func applyRouter(t *testing.T, ctx context.Context, k *kube, r *release) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": routerNamespace},
	}}
	k.apply(t, ctx, "router.yaml's namespace", installManager, []*unstructured.Unstructured{ns})
	k.apply(t, ctx, "router.yaml", installManager, r.router)
}

// checkPins: every workload image in the manifests is pinned to the index digest of its image
// in dist/images, so what is applied runs exactly what was built.
func checkPins(t *testing.T, r *release) {
	t.Helper()
	pins := pinnedImages(append(slices.Clone(r.install), r.router...))
	if len(pins["sandbox-controller"]) == 0 || len(pins["sandbox-router"]) == 0 {
		t.Fatalf("the release's workloads name no controller or router image: %v", pins)
	}
	for name, refs := range pins {
		for _, ref := range refs {
			if want := r.digests[name]; want == "" || !strings.HasSuffix(ref, "@"+want) {
				t.Errorf("image %s, want it pinned to @%s", ref, want)
			}
		}
	}
}

// readExample reads docs/example's resources as its kustomization lists them, in its namespace.
// Its transformer (the render function's config) is the GitOps tool's business, not the cluster's.
func readExample(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "docs", "example")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &kz); err != nil {
		t.Fatal(err)
	}
	if kz.Namespace != exampleNamespace {
		t.Fatalf("docs/example's namespace is %q, want %q", kz.Namespace, exampleNamespace)
	}
	var out []*unstructured.Unstructured
	for _, res := range kz.Resources {
		objs, err := readManifest(filepath.Join(dir, res))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			o.SetNamespace(kz.Namespace)
		}
		out = append(out, objs...)
	}
	return out
}

// installedCRDs are the CRDs of install.yaml as the cluster has them now.
func installedCRDs(ctx context.Context, k *kube, install []*unstructured.Unstructured) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, o := range install {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k.c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

func crdsEstablished(ctx context.Context, k *kube, install []*unstructured.Unstructured) error {
	crds, err := installedCRDs(ctx, k, install)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		established := false
		for _, c := range crd.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			return fmt.Errorf("CRD %s not established", crd.Name)
		}
	}
	return nil
}

// caBundlesSet is nil once every CRD that converts through the webhook carries the CA the
// controller keeps in its Secret.
func caBundlesSet(ctx context.Context, k *kube, install []*unstructured.Unstructured) error {
	secret := &corev1.Secret{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, secret); err != nil {
		return err
	}
	ca := secret.Data[certs.CABundleKey]
	if len(ca) == 0 {
		return fmt.Errorf("Secret %s/%s has no %s yet", secret.Namespace, secret.Name, certs.CABundleKey)
	}
	crds, err := installedCRDs(ctx, k, install)
	if err != nil {
		return err
	}
	n := 0
	for _, crd := range crds {
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
			continue
		}
		n++
		if conv.Webhook == nil || conv.Webhook.ClientConfig == nil || !bytes.Equal(conv.Webhook.ClientConfig.CABundle, ca) {
			return fmt.Errorf("CRD %s: caBundle is not the controller's CA", crd.Name)
		}
	}
	if n == 0 {
		return errors.New("no CRD of install.yaml converts through the webhook")
	}
	return nil
}

func claimsReady(ctx context.Context, k *kube, names []string) error {
	var errs []error
	for _, name := range names {
		c := &extv1beta1.SandboxClaim{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: name}, c); err != nil {
			errs = append(errs, err)
			continue
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
			errs = append(errs, fmt.Errorf("claim %s not Ready: %+v", name, cond))
		}
	}
	return errors.Join(errs...)
}

func poolFull(ctx context.Context, k *kube, name string) error {
	return poolFullIn(ctx, k, exampleNamespace, name)
}

// poolFullIn is nil once the pool ns/name has as many Ready members as it asks for.
func poolFullIn(ctx context.Context, k *kube, ns, name string) error {
	p := &extv1beta1.SandboxWarmPool{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return err
	}
	want := int32(1)
	if p.Spec.Replicas != nil {
		want = *p.Spec.Replicas
	}
	if p.Status.ReadyReplicas != want || p.Status.ObservedGeneration != p.Generation {
		return fmt.Errorf("pool %s: %d of %d members ready (generation %d observed %d)", name, p.Status.ReadyReplicas, want, p.Generation, p.Status.ObservedGeneration)
	}
	return nil
}

// checkV1alpha1RoundTrip creates a claim as v1alpha1, which the API server stores as v1beta1
// through the conversion webhook, and reads it back both ways.
func checkV1alpha1RoundTrip(t *testing.T, ctx context.Context, k *kube) {
	t.Helper()
	spec := map[string]any{"sandboxTemplateRef": map[string]any{"name": "python"}, "warmpool": "python"}
	alpha := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "carol", "namespace": exampleNamespace},
		"spec":     spec,
	}}
	ri, err := k.resource(alpha)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Create(ctx, alpha, metav1.CreateOptions{FieldManager: gitopsManager}); err != nil {
		t.Fatalf("creating a v1alpha1 claim: %v", err)
	}
	beta := &extv1beta1.SandboxClaim{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: "carol"}, beta); err != nil {
		t.Fatalf("reading the v1alpha1 claim as v1beta1: %v", err)
	}
	if beta.Spec.WarmPoolRef.Name != "python" {
		t.Errorf("v1beta1 warmPoolRef.name = %q, want python", beta.Spec.WarmPoolRef.Name)
	}
	testenv.Eventually(t, timeout, "the v1alpha1 claim Ready", func() error { return claimsReady(ctx, k, []string{"carol"}) })
	got, err := ri.Get(ctx, "carol", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the claim back as v1alpha1: %v", err)
	}
	gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if diff := cmp.Diff(spec, gotSpec); diff != "" {
		t.Errorf("v1alpha1 spec after the round trip (-sent +read):\n%s", diff)
	}
	if conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions"); len(conds) == 0 {
		t.Error("v1alpha1 status has no conditions")
	}
}

// restartMidway creates claims, kills the controller once some but not all are Ready, creates
// more while it is down, starts it again and checks every claim is Ready with a Sandbox of its
// own, the pool full again, and no Sandbox, Pod or Service more than that. It returns the
// names of all claims.
func restartMidway(t *testing.T, ctx context.Context, k *kube, env environment, claims []string) []string {
	t.Helper()
	create := func(name string) {
		c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: exampleNamespace, Name: name}}
		c.Spec.WarmPoolRef.Name = "python"
		if err := k.c.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, name)
	}
	burst := 6
	if b, ok := env.(interface{ burstSize() int }); ok {
		burst = b.burstSize()
	}
	var before []string
	for i := range burst {
		before = append(before, fmt.Sprintf("burst-%d", i))
		create(before[i])
	}
	testenv.Eventually(t, timeout, "some burst claim Ready", func() error {
		for _, name := range before {
			if claimsReady(ctx, k, []string{name}) == nil {
				return nil
			}
		}
		return errors.New("none Ready yet")
	})
	env.kill(t, ctx, k)
	if claimsReady(ctx, k, before) == nil {
		t.Log("every burst claim was Ready before the kill; the restart is tested on the claims made while it was down")
	}
	for i := range 2 {
		create(fmt.Sprintf("while-down-%d", i))
	}
	env.start(t, ctx, k)
	testenv.Eventually(t, timeout, "every claim Ready and the pool full after the restart", func() error {
		return errors.Join(claimsReady(ctx, k, claims), poolFull(ctx, k, "python"), noDuplicates(ctx, k, claims, 2))
	})
	return claims
}

// noDuplicates is nil when every claim has a Sandbox of its own, the pool has poolSize more,
// there is no other Sandbox, and each Sandbox has exactly one Pod and at most one Service.
func noDuplicates(ctx context.Context, k *kube, claims []string, poolSize int) error {
	in := client.InNamespace(exampleNamespace)
	var sandboxes agentsv1beta1.SandboxList
	var pods corev1.PodList
	var services corev1.ServiceList
	for _, l := range []client.ObjectList{&sandboxes, &pods, &services} {
		if err := k.c.List(ctx, l, in); err != nil {
			return err
		}
	}
	byName := map[string]agentsv1beta1.Sandbox{}
	for _, sb := range sandboxes.Items {
		byName[sb.Name] = sb
	}
	owner := map[string]string{}
	for _, name := range claims {
		c := &extv1beta1.SandboxClaim{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: name}, c); err != nil {
			return err
		}
		sb := c.Status.SandboxStatus.Name
		if _, ok := byName[sb]; !ok {
			return fmt.Errorf("claim %s names Sandbox %q, which does not exist", name, sb)
		}
		if other, dup := owner[sb]; dup {
			return fmt.Errorf("claims %s and %s share Sandbox %s", other, name, sb)
		}
		owner[sb] = name
	}
	if want := len(claims) + poolSize; len(sandboxes.Items) != want {
		return fmt.Errorf("%d Sandboxes, want %d (%d claims and a pool of %d)", len(sandboxes.Items), want, len(claims), poolSize)
	}
	children := func(refs [][]metav1.OwnerReference) map[types.UID]int {
		n := map[types.UID]int{}
		for _, r := range refs {
			for _, ref := range r {
				if ref.Kind == "Sandbox" && ref.Controller != nil && *ref.Controller {
					n[ref.UID]++
				}
			}
		}
		return n
	}
	var podRefs, svcRefs [][]metav1.OwnerReference
	for _, p := range pods.Items {
		podRefs = append(podRefs, p.OwnerReferences)
	}
	for _, s := range services.Items {
		svcRefs = append(svcRefs, s.OwnerReferences)
	}
	podsOf, svcsOf := children(podRefs), children(svcRefs)
	if len(pods.Items) != len(sandboxes.Items) {
		return fmt.Errorf("%d Pods for %d Sandboxes", len(pods.Items), len(sandboxes.Items))
	}
	for _, sb := range sandboxes.Items {
		if podsOf[sb.UID] != 1 || svcsOf[sb.UID] > 1 {
			return fmt.Errorf("Sandbox %s has %d Pods and %d Services, want 1 and at most 1", sb.Name, podsOf[sb.UID], svcsOf[sb.UID])
		}
	}
	return nil
}

// checkForegroundDelete deletes a claim with DeleteForeground and waits for the garbage
// collector to take its Sandbox and the Sandbox's Pod and Service with it.
func checkForegroundDelete(t *testing.T, ctx context.Context, k *kube, name string) {
	t.Helper()
	claim := &extv1beta1.SandboxClaim{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: name}, claim); err != nil {
		t.Fatal(err)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: exampleNamespace, Name: claim.Status.SandboxStatus.Name}, sb); err != nil {
		t.Fatal(err)
	}
	var dependents []client.Object
	var pods corev1.PodList
	var services corev1.ServiceList
	for _, l := range []client.ObjectList{&pods, &services} {
		if err := k.c.List(ctx, l, client.InNamespace(exampleNamespace)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], sb) {
			dependents = append(dependents, &pods.Items[i])
		}
	}
	for i := range services.Items {
		if metav1.IsControlledBy(&services.Items[i], sb) {
			dependents = append(dependents, &services.Items[i])
		}
	}
	if len(dependents) == 0 {
		t.Fatalf("Sandbox %s has no Pod or Service", sb.Name)
	}
	if err := k.c.Delete(ctx, claim, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	all := append([]client.Object{claim, sb}, dependents...)
	testenv.Eventually(t, timeout, "the claim, its Sandbox and the Sandbox's children gone", func() error {
		var left []string
		for _, o := range all {
			err := k.c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
			if err == nil {
				left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %s", strings.Join(left, ", "))
		}
		return nil
	})
	if err := poolFull(ctx, k, "python"); err != nil {
		t.Errorf("after the claim's deletion: %v", err)
	}
}

// leftovers is nil when no CRD of ours is left and no object in any namespace is owned by one
// of our kinds or carries our labels. Events are not counted: they expire on their own.
func leftovers(ctx context.Context, k *kube) error {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := k.c.List(ctx, &crds); err != nil {
		return err
	}
	var left []string
	for _, c := range crds.Items {
		if slices.Contains(ourGroups, c.Spec.Group) {
			left = append(left, "CRD "+c.Name)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "persistentvolumeclaims"}, {Version: "v1", Resource: "secrets"},
		{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "serviceaccounts"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	} {
		l, err := k.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range l.Items {
			if ours(&o) {
				left = append(left, fmt.Sprintf("%s %s", gvr.Resource, strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/")))
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// ours: owned by one of our kinds, or labelled as part of sandbox-gitops or as a child of an
// agent-sandbox object.
func ours(o *unstructured.Unstructured) bool {
	for _, ref := range o.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if slices.Contains(ourGroups, gv.Group) {
			return true
		}
	}
	for key, value := range o.GetLabels() {
		if strings.Contains(key, "agents.x-k8s.io/") || (key == "app.kubernetes.io/name" && (value == "sandbox-gitops" || value == routerName)) {
			return true
		}
	}
	return strings.HasPrefix(o.GetName(), "sandbox-gitops") || strings.HasPrefix(o.GetName(), routerName)
}
