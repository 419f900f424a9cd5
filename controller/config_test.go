package controller_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestRBACUpToDate: config/rbac/role.yaml is what controller-gen makes of the +kubebuilder:rbac
// markers in controller/ and webhook/ (the suites run the controller under exactly that role).
func TestRBACUpToDate(t *testing.T) {
	gen := testenv.Tool(t, "controller-gen")
	out := t.TempDir()
	cmd := exec.Command(gen, "rbac:roleName=sandbox-gitops-controller", "paths=./controller/...", "paths=./webhook/...", "output:rbac:artifacts:config="+out)
	cmd.Dir = testenv.RepoRoot()
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, o)
	}
	got, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("config/rbac/role.yaml is stale; run make manifests (-committed +generated):\n%s", diff)
	}
}

// TestRBACIsLeastPrivilege: no wildcards, no escalation verbs, nothing cluster-admin-like in
// the role the controller runs under. Secrets and CRDs only by name: get and update of the
// webhook's certificate Secret in the controller's own namespace, get and patch (the caBundle)
// of the four agent-sandbox CRDs.
func TestRBACIsLeastPrivilege(t *testing.T) {
	objs, err := readManifests(filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]struct {
		kind, namespace string
		names, verbs    []string
	}{
		"secrets": {"Role", "sandbox-gitops-system", []string{"sandbox-gitops-webhook-cert"}, []string{"get", "update"}},
		"customresourcedefinitions": {"ClusterRole", "", []string{
			"sandboxclaims.extensions.agents.x-k8s.io", "sandboxes.agents.x-k8s.io",
			"sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io",
		}, []string{"get", "patch"}},
	}
	for _, o := range objs {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			for _, res := range resources {
				want, ok := byName[res]
				if !ok {
					continue
				}
				names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
				verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
				got := []any{o.GetKind(), o.GetNamespace(), resources, names, verbs}
				if diff := cmp.Diff([]any{want.kind, want.namespace, []string{res}, want.names, want.verbs}, got); diff != "" {
					t.Errorf("%s %s: %s only by name, only what the webhook needs ([kind namespace resources resourceNames verbs] -want +got):\n%s", o.GetKind(), o.GetName(), res, diff)
				}
			}
			for _, k := range []string{"apiGroups", "resources", "verbs"} {
				vals, _, _ := unstructured.NestedStringSlice(rule, k)
				for _, v := range vals {
					if v == "*" {
						t.Errorf("%s %s: wildcard in %s", o.GetKind(), o.GetName(), k)
					}
					if k == "resources" && (strings.HasPrefix(v, "roles") || strings.HasPrefix(v, "clusterroles")) {
						t.Errorf("%s %s: the controller must not touch %s", o.GetKind(), o.GetName(), v)
					}
					if k == "verbs" && (v == "escalate" || v == "bind" || v == "impersonate") {
						t.Errorf("%s %s: verb %s", o.GetKind(), o.GetName(), v)
					}
				}
			}
		}
		if o.GetKind() == "ClusterRoleBinding" {
			if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref == "cluster-admin" {
				t.Errorf("%s binds cluster-admin", o.GetName())
			}
		}
	}
}

// TestConfigDefaultBuilds: `kustomize build config/default` (the content of
// `kubectl apply -k config/default`) builds with the kustomize from make tools, and holds the
// CRDs, the RBAC the suite ran under, the Deployment, and the conversion webhook's Service and
// (empty) certificate Secret.
func TestConfigDefaultBuilds(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	cmd := exec.Command(kustomize, "build", filepath.Join(testenv.RepoRoot(), "config", "default"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v\n%s", err, exitStderr(err))
	}
	kinds := map[string]int{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var u map[string]any
		if err := yaml.Unmarshal([]byte(doc), &u); err != nil {
			t.Fatal(err)
		}
		kinds[u["kind"].(string)]++
	}
	want := map[string]int{
		"CustomResourceDefinition": 5, "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 2, "RoleBinding": 2, "Deployment": 1, "Service": 2, "Secret": 1,
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("kustomize build config/default kinds (-want +got):\n%s", diff)
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestWriteCountsCoverRBAC: the write counts every zero-write test and the benchmarks read
// (controllerResources) take in every write config/rbac lets the controller make, so no write of
// its own can go unseen. The exceptions are the writes the suite's controllers never make: Sandbox
// creates with POST are the tests' own (the controller creates Sandboxes by server-side apply),
// and the webhook's Secret and CRD writes and the leader-election Lease belong to the binary's
// webhook and --leader-elect, which the in-process controllers do not run.
func TestWriteCountsCoverRBAC(t *testing.T) {
	exempt := map[string]bool{"sandboxes POST": true, "customresourcedefinitions PATCH": true, "customresourcedefinitions APPLY": true,
		"secrets PUT": true}
	objs, err := readManifests(filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string][]string{"create": {"POST"}, "update": {"PUT"}, "patch": {"PATCH", "APPLY"}, "delete": {"DELETE"}, "deletecollection": {"DELETECOLLECTION"}}
	var missing []string
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && !(o.GetKind() == "Role" && o.GetName() == "sandbox-gitops-controller") {
			continue // the leader-election Role: Leases only
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			for _, res := range resources {
				for _, v := range verbs {
					for _, m := range methods[v] {
						if k := res + " " + m; !controllerResources[k] && !exempt[k] {
							missing = append(missing, k)
						}
					}
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("config/rbac lets the controller write what the write counts leave out: %v", missing)
	}
}
