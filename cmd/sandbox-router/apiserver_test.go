package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/router"
	"github.com/sandbox-gitops/sandbox-gitops/router/authz"
	"github.com/sandbox-gitops/sandbox-gitops/router/resolve"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// routerNamespace is where bases/router deploys: upstream's agent-sandbox-system, which the base
// does not create.
const routerNamespace = "agent-sandbox-system"

// routerUser is the identity the router runs as in the cluster (bases/router's ServiceAccount).
const routerUser = "system:serviceaccount:" + routerNamespace + ":sandbox-router"

// TestAgainstAPIServer runs the router's API-server suites on one real kube-apiserver and etcd
// (envtest, with its RBAC authorizer and ServiceAccount token signing): the manifests of
// bases/router, resolution through the informer cache, caller authorisation, and the command end
// to end. One control plane for all of them, as they share the objects set up here.
func TestAgainstAPIServer(t *testing.T) {
	env := startEnvironment(t)
	admin, err := client.New(env.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("base", func(t *testing.T) { testBase(t, ctx, admin) })
	// The router's own identity, authenticated by a client certificate, with exactly the
	// permissions bases/router (and its authz component) bind to its ServiceAccount.
	ru, err := env.AddUser(envtest.User{Name: routerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + routerNamespace}}, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	routerCfg := ru.Config()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "sandbox says hi to %s", r.Header.Get(router.HeaderID))
	}))
	defer backend.Close()
	fx := setUpSandboxes(t, ctx, admin)
	t.Run("resolution", func(t *testing.T) { testResolution(t, ctx, admin, routerCfg, fx) })
	t.Run("authz", func(t *testing.T) { testAuthz(t, ctx, admin, env.Config, routerCfg, fx) })
	t.Run("command", func(t *testing.T) { testCommand(t, ctx, admin, routerCfg, backend) })
}

// startEnvironment is testenv.StartAPIServer returning the environment itself, for AddUser.
func startEnvironment(t *testing.T) *envtest.Environment {
	t.Helper()
	testenv.Tool(t, "kube-apiserver")
	testenv.Tool(t, "etcd")
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Wrap(&envtest.Environment{BinaryAssetsDirectory: testenv.BinDir(), CRDs: crds, ErrorIfCRDPathMissing: true})
	env.StartForTest(t)
	return env.Environment
}

func init() {
	// The informer cache logs through controller-runtime; the tests' own failures say enough.
	ctrllog.SetLogger(logr.Discard())
}

func scheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// kustomizeBuild runs the real kustomize from `make tools`.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(testenv.Tool(t, "kustomize"), "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return stdout.Bytes()
}

// testBase: `kustomize build bases/router` (and with the authz component) equals its golden,
// carries no Namespace, and applies on the API server with a server-side dry run into the
// namespace a user creates first, as the docs say; the ServiceAccount and RBAC objects are applied
// for real, as the router identity below depends on them.
func testBase(t *testing.T, ctx context.Context, c client.Client) {
	// What `kubectl create namespace agent-sandbox-system --dry-run=client -o yaml | kubectl
	// apply --server-side -f -` sends: twice, as it must be idempotent.
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": routerNamespace},
	}}
	for range 2 {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ns.DeepCopy()), client.FieldOwner("kubectl")); err != nil {
			t.Fatalf("creating namespace %s: %v", routerNamespace, err)
		}
	}
	for _, g := range []struct{ name, dir string }{
		{"bases-router.yaml", filepath.Join(testenv.RepoRoot(), "bases", "router")},
		{"with-authz.yaml", filepath.Join("testdata", "with-authz")},
	} {
		name, dir := g.name, g.dir
		built := kustomizeBuild(t, dir)
		golden := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(golden, built, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("no golden %s (run go test ./cmd/sandbox-router -update): %v", golden, err)
		}
		if diff := cmp.Diff(string(want), string(built)); diff != "" {
			t.Errorf("kustomize build %s (-golden +built):\n%s", dir, diff)
		}
		objs, err := manifest.Parse(name, built)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			// A Namespace in router.yaml would make `kubectl delete -f router.yaml` delete
			// upstream's namespace and whatever runs in it.
			if o.GetKind() == "Namespace" {
				t.Errorf("%s holds Namespace %s: the router's namespace is upstream's, not the base's", name, o.GetName())
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.FieldOwner("router-test"), client.ForceOwnership); err != nil {
				t.Errorf("%s: server-side dry run of %s %s: %v", name, o.GetKind(), o.GetName(), err)
			}
			if name == "with-authz.yaml" && o.GetAPIVersion() == "rbac.authorization.k8s.io/v1" ||
				o.GetKind() == "ServiceAccount" {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("router-test"), client.ForceOwnership); err != nil {
					t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		}
	}
	// The secure-default NetworkPolicy's router peer selects the namespace by its
	// kubernetes.io/metadata.name label: the API server must have set it.
	var got corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: routerNamespace}, &got); err != nil {
		t.Fatal(err)
	}
	checkPeerSelects(t, got.Labels, routerPodLabels(t, kustomizeBuild(t, filepath.Join(testenv.RepoRoot(), "bases", "router"))))
}

// fixtures are the Sandboxes of the resolution and authz suites.
type fixtures struct {
	readyUID types.UID
}

func sandboxObj(ns, name string, labels map[string]string, owner *metav1.OwnerReference) *agentsv1beta1.Sandbox {
	s := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "python:3.12"}}}},
		}},
	}
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return s
}

// createSandbox creates a Sandbox, its status (Ready or not), and, when podIP is set, its
// Running Pod as the controller would: named podName, name-hash label, controller reference.
func createSandbox(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox, ready bool, podName, podIP string) *agentsv1beta1.Sandbox {
	t.Helper()
	if podName != sb.Name {
		sb.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: podName}
	}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatalf("creating Sandbox %s: %v", sb.Name, err)
	}
	setReady(t, ctx, c, sb, ready)
	if podIP == "" {
		return sb
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: podName,
			Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: render.NameHash(sb.Name)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox",
				Name: sb.Name, UID: sb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: sb.Spec.PodTemplate.Spec,
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("creating Pod %s: %v", podName, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatalf("writing the status of Pod %s: %v", podName, err)
	}
	return sb
}

func setReady(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox, ready bool) {
	t.Helper()
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "DependenciesNotReady",
		Message: "Pod exists with phase: Pending", ObservedGeneration: sb.Generation, LastTransitionTime: metav1.Now()}
	if ready {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "DependenciesReady", "Pod is Ready"
	}
	sb.Status.Conditions = []metav1.Condition{cond}
	if err := c.Status().Update(ctx, sb); err != nil {
		t.Fatalf("writing the status of Sandbox %s: %v", sb.Name, err)
	}
}

func setUpSandboxes(t *testing.T, ctx context.Context, c client.Client) fixtures {
	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	ready := createSandbox(t, ctx, c, sandboxObj("team-a", "ready", nil, nil), true, "ready", "10.0.0.5")
	createSandbox(t, ctx, c, sandboxObj("team-a", "pending", nil, nil), false, "pending", "10.0.0.6")
	// A warm-pool member: generated name, owned by its pool, no Service.
	createSandbox(t, ctx, c, sandboxObj("team-a", "python-pool-x7k2p",
		map[string]string{agentsv1beta1.SandboxWarmPoolLabel: render.NameHash("python-pool")},
		&metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool", Name: "python-pool", UID: "pool-uid", Controller: ptr.To(true)}),
		true, "python-pool-x7k2p", "10.0.0.7")
	// A claimed Sandbox: adopted by a claim, its Pod named by the pod-name annotation.
	createSandbox(t, ctx, c, sandboxObj("team-a", "python-pool-q9w8e", nil,
		&metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: "my-claim", UID: "claim-uid", Controller: ptr.To(true)}),
		true, "python-pool-q9w8e-pod", "10.0.0.8")
	createSandbox(t, ctx, c, sandboxObj("team-b", "ready", nil, nil), true, "ready", "10.0.1.5")
	// The end-to-end Sandbox: its "Pod" is the test's backend on loopback.
	createSandbox(t, ctx, c, sandboxObj("default", "e2e", nil, nil), true, "e2e", "127.0.0.1")
	// A Service that is not a Sandbox, besides the API server's own "kubernetes".
	if err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "database"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}); err != nil {
		t.Fatal(err)
	}
	return fixtures{readyUID: ready.UID}
}

func startCache(t *testing.T, ctx context.Context, cfg *rest.Config, namespaces ...string) *resolve.Cache {
	t.Helper()
	c, err := resolve.NewCache(cfg, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := c.Start(cctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

type outcome struct {
	Addr           string `json:",omitempty"`
	Status         int    `json:",omitempty"`
	Reason, Header string `json:",omitempty"`
}

func resolveOutcome(c *resolve.Cache, ns, name, uid string) outcome {
	t, err := c.Resolve(context.Background(), router.Request{Namespace: ns, Name: name, UID: uid, Port: 8888})
	if err != nil {
		return outcome{Status: err.Status, Reason: err.Reason, Header: err.Header}
	}
	return outcome{Addr: t.Addr.String()}
}

// testResolution: the informer cache, run as the router's ServiceAccount with only the base's
// RBAC, resolves Ready Sandboxes (plain, warm, claimed) to their Pods and refuses the rest,
// including Services that are not Sandboxes; it follows changes; --namespaces narrows it.
func testResolution(t *testing.T, ctx context.Context, admin client.Client, routerCfg *rest.Config, fx fixtures) {
	c := startCache(t, ctx, routerCfg)
	cases := map[string]struct {
		reason        string
		ns, name, uid string
		want          outcome
	}{
		"ready":          {reason: "a Ready Sandbox", ns: "team-a", name: "ready", want: outcome{Addr: "10.0.0.5:8888"}},
		"ready by uid":   {reason: "X-Sandbox-UID", ns: "team-a", name: "ready", uid: string(fx.readyUID), want: outcome{Addr: "10.0.0.5:8888"}},
		"same name in b": {reason: "names are per namespace", ns: "team-b", name: "ready", want: outcome{Addr: "10.0.1.5:8888"}},
		"uid of a":       {reason: "a UID from team-a does not resolve in team-b", ns: "team-b", name: "ready", uid: string(fx.readyUID), want: outcome{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-UID"}},
		"not ready":      {reason: "Ready=False", ns: "team-a", name: "pending", want: outcome{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"missing":        {reason: "no such Sandbox", ns: "team-a", name: "nothing-here", want: outcome{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"}},
		"warm":           {reason: "a warm-pool member without a Service", ns: "team-a", name: "python-pool-x7k2p", want: outcome{Addr: "10.0.0.7:8888"}},
		"claimed":        {reason: "a claimed Sandbox whose Pod is named by the annotation", ns: "team-a", name: "python-pool-q9w8e", want: outcome{Addr: "10.0.0.8:8888"}},
		"a service":      {reason: "a Service that is not a Sandbox is refused", ns: "team-a", name: "database", want: outcome{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"}},
		"the api server": {reason: "the kubernetes Service is refused", ns: "default", name: "kubernetes", want: outcome{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"}},
		"a pod, no sb":   {reason: "a Pod name alone is not enough", ns: "team-a", name: "python-pool-q9w8e-pod", want: outcome{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolveOutcome(c, tc.ns, tc.name, tc.uid)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}

	t.Run("follows changes", func(t *testing.T) {
		var sb agentsv1beta1.Sandbox
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "pending"}, &sb); err != nil {
			t.Fatal(err)
		}
		setReady(t, ctx, admin, &sb, true)
		waitOutcome(t, c, "team-a", "pending", outcome{Addr: "10.0.0.6:8888"})
		setReady(t, ctx, admin, &sb, false)
		waitOutcome(t, c, "team-a", "pending", outcome{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"})
	})

	t.Run("namespaces", func(t *testing.T) {
		nc := startCache(t, ctx, routerCfg, "team-b")
		var b agentsv1beta1.Sandbox
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "ready"}, &b); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ns, uid string
			want    outcome
		}{
			{"team-b", "", outcome{Addr: "10.0.1.5:8888"}},
			{"team-b", string(b.UID), outcome{Addr: "10.0.1.5:8888"}},
			{"team-a", "", outcome{Status: 404, Reason: "NamespaceNotServed", Header: "X-Sandbox-Namespace"}},
		} {
			if diff := cmp.Diff(tc.want, resolveOutcome(nc, tc.ns, "ready", tc.uid)); diff != "" {
				t.Errorf("--namespaces team-b, Sandbox %s/ready (-want +got):\n%s", tc.ns, diff)
			}
		}
	})
}

func waitOutcome(t *testing.T, c *resolve.Cache, ns, name string, want outcome) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := resolveOutcome(c, ns, name, "")
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s never resolved as wanted (-want +got):\n%s", ns, name, cmp.Diff(want, got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testAuthz: callers are ServiceAccounts with real tokens (TokenRequest); the router, as its own
// identity with the authz component's RBAC, asks the API server. RBAC grants alice
// sandboxes/proxy on team-a/ready only.
func testAuthz(t *testing.T, ctx context.Context, admin client.Client, adminCfg, routerCfg *rest.Config, fx fixtures) {
	cs := kubernetes.NewForConfigOrDie(adminCfg)
	token := func(name string) string {
		if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("team-a").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	alice, bob := token("alice"), token("bob")
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "reach-ready"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"get"}, ResourceNames: []string{"ready"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "alice-reaches-ready"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reach-ready"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "alice", Namespace: "team-a"}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's RBAC authorizer learns of the new Role and binding through its own
	// informers: wait until it does, or the first decision (and its cache) is a stale denial.
	testenv.Eventually(t, time.Minute, "RBAC granting alice team-a/ready", func() error {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:team-a:alice",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Group: "agents.x-k8s.io", Resource: "sandboxes",
				Subresource: "proxy", Verb: "get", Name: "ready"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", sar.Status.Reason)
		}
		return nil
	})
	authorizer := authz.New(kubernetes.NewForConfigOrDie(routerCfg), authz.Options{TTL: time.Minute})
	type refusal struct {
		Status         int
		Reason, Header string
	}
	cases := map[string]struct {
		reason, auth, ns, name string
		want                   *refusal
	}{
		"allowed":         {reason: "alice may reach team-a/ready", auth: "Bearer " + alice, ns: "team-a", name: "ready"},
		"allowed again":   {reason: "the cached decision", auth: "Bearer " + alice, ns: "team-a", name: "ready"},
		"other sandbox":   {reason: "resourceNames: only ready", auth: "Bearer " + alice, ns: "team-a", name: "pending", want: &refusal{403, "Forbidden", "Authorization"}},
		"other namespace": {reason: "the Role is in team-a", auth: "Bearer " + alice, ns: "team-b", name: "ready", want: &refusal{403, "Forbidden", "Authorization"}},
		"no binding":      {reason: "bob has no binding", auth: "Bearer " + bob, ns: "team-a", name: "ready", want: &refusal{403, "Forbidden", "Authorization"}},
		"forged token":    {reason: "a token the API server did not sign", auth: "Bearer " + alice[:len(alice)-4] + "AAAA", ns: "team-a", name: "ready", want: &refusal{401, "Unauthenticated", "Authorization"}},
		"no token":        {reason: "no Authorization header", ns: "team-a", name: "ready", want: &refusal{401, "Unauthenticated", "Authorization"}},
		"basic auth":      {reason: "not a bearer token", auth: "Basic YWxpY2U6cHc=", ns: "team-a", name: "ready", want: &refusal{401, "Unauthenticated", "Authorization"}},
	}
	for _, name := range []string{"allowed", "allowed again", "other sandbox", "other namespace", "no binding", "forged token", "no token", "basic auth"} {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			err := authorizer.Authorize(ctx, r, router.Request{Namespace: tc.ns, Name: tc.name, Port: 8888})
			var got *refusal
			if err != nil {
				got = &refusal{err.Status, err.Reason, err.Header}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}

	t.Run("decisions are cached", func(t *testing.T) {
		// Counted on the API server: a repeated request within the TTL asks nothing; after the
		// TTL, one TokenReview and one SubjectAccessReview again.
		now := time.Now()
		a := authz.New(kubernetes.NewForConfigOrDie(routerCfg), authz.Options{TTL: 10 * time.Second, Now: func() time.Time { return now }})
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+alice)
		check := func(wantReviews float64) {
			t.Helper()
			before := reviews(t, ctx, cs)
			if err := a.Authorize(ctx, r, router.Request{Namespace: "team-a", Name: "ready", Port: 8888}); err != nil {
				t.Fatal(err)
			}
			if got := reviews(t, ctx, cs) - before; got != wantReviews {
				t.Errorf("token and access reviews on the API server: %v, want %v", got, wantReviews)
			}
		}
		check(2)
		check(0)
		now = now.Add(11 * time.Second)
		check(2)
	})

	t.Run("least privilege", func(t *testing.T) {
		// The base alone does not let the router ask for reviews: without the authz
		// component's binding the check is unavailable (503), never a silent allow.
		if err := admin.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-router-authz"}}); err != nil {
			t.Fatal(err)
		}
		a := authz.New(kubernetes.NewForConfigOrDie(routerCfg), authz.Options{})
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+alice)
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := a.Authorize(ctx, r, router.Request{Namespace: "team-a", Name: "ready", Port: 8888})
			if err != nil && err.Reason == router.ReasonAuthorizationUnavailable && err.Status == 503 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("without the authz binding: %+v, want 503 AuthorizationUnavailable", err)
			}
			time.Sleep(50 * time.Millisecond) // the RBAC authorizer's cache catches up
		}
	})
}

// reviews is the API server's count of TokenReview and SubjectAccessReview creations.
func reviews(t *testing.T, ctx context.Context, cs *kubernetes.Clientset) float64 {
	t.Helper()
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `verb="POST"`) && !strings.Contains(line, `verb="CREATE"`) && !strings.Contains(line, `verb="create"`) {
			continue
		}
		if !strings.Contains(line, `resource="tokenreviews"`) && !strings.Contains(line, `resource="subjectaccessreviews"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// testCommand runs sandbox-router itself with a kubeconfig for the router identity: ready after
// the cache syncs, a request for the e2e Sandbox reaches the backend (its Pod IP is loopback),
// a request naming a Service that is not a Sandbox is refused, and SIGTERM (ctx) stops it with 0.
func testCommand(t *testing.T, ctx context.Context, admin client.Client, routerCfg *rest.Config, backend *httptest.Server) {
	kubeconfig := writeKubeconfig(t, routerCfg)
	addr := testenv.FreeAddr(t)
	rctx, stop := context.WithCancel(ctx)
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(rctx, []string{"--kubeconfig", kubeconfig, "--listen", addr, "--metrics-listen", "", "--namespaces", "default,team-a", "--shutdown-delay", "0"}, io.Discard, &stderr)
	}()
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("sandbox-router never became ready:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	send := func(ns, name, port string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		req.Header.Set(router.HeaderID, name)
		req.Header.Set(router.HeaderNamespace, ns)
		req.Header.Set(router.HeaderPort, port)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, port, _ := net.SplitHostPort(backend.Listener.Addr().String())
	if code, body := send("default", "e2e", port); code != 200 || body != "sandbox says hi to e2e" {
		t.Errorf("e2e Sandbox: %d %q", code, body)
	}
	for _, svc := range [][2]string{{"default", "kubernetes"}, {"team-a", "database"}} {
		code, body := send(svc[0], svc[1], "443")
		var e router.Error
		_ = json.Unmarshal([]byte(body), &e)
		if code != 404 || e.Reason != router.ReasonSandboxNotFound || e.Header != router.HeaderID {
			t.Errorf("Service %s/%s (not a Sandbox): %d %s; want 404 SandboxNotFound naming X-Sandbox-ID", svc[0], svc[1], code, body)
		}
	}
	if code, body := send("team-b", "ready", "8888"); code != 404 || !strings.Contains(body, "NamespaceNotServed") {
		t.Errorf("team-b outside --namespaces: %d %s", code, body)
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0:\n%s", code, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("sandbox-router did not stop")
	}
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["router"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["router"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "router"}
	kc.CurrentContext = "router"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
