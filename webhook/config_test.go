package webhook_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// TestCertManagerComponent: config/default with the component config/certmanager builds, and its
// pieces agree with each other: the Certificate names the Service the CRDs convert through, its
// Secret is the one the Deployment mounts where --webhook-cert-dir points, the controller's own
// rotation and its access to Secrets are off, and every CRD asks cert-manager's CA injector for
// that Certificate's CA.
func TestCertManagerComponent(t *testing.T) {
	kustomize := testenv.Tool(t, "kustomize")
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "config"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources: [" + rel + "/default]\ncomponents: [" + rel + "/certmanager]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kustomize, "build", dir).Output()
	if err != nil {
		t.Fatalf("kustomize build: %v %s", err, stderrOf(err))
	}
	objs, err := manifest.Parse("kustomize build", out)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	wantKinds := map[string]int{
		"CustomResourceDefinition": 5, "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 2, "Issuer": 1, "Certificate": 1,
	}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}

	cert := byKind["Certificate"][0]
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	for _, c := range byKind["CustomResourceDefinition"] {
		if c.GetName() == "sandboxrenders.render.sandbox-gitops.dev" {
			if _, injected := c.GetAnnotations()["cert-manager.io/inject-ca-from"]; injected {
				t.Errorf("CRD %s converts nothing, yet asks for a CA", c.GetName())
			}
			continue
		}
		svc, _, _ := unstructured.NestedString(c.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
		ns, _, _ := unstructured.NestedString(c.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
		if !slices.Contains(dnsNames, svc+"."+ns+".svc") {
			t.Errorf("CRD %s converts through %s.%s.svc, which the Certificate (%v) does not name", c.GetName(), svc, ns, dnsNames)
		}
		if got, want := c.GetAnnotations()["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
			t.Errorf("CRD %s: inject-ca-from %q, want %q", c.GetName(), got, want)
		}
	}

	dep := byKind["Deployment"][0]
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	mounts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "volumeMounts")
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	var mountPath, mountedSecret string
	for _, m := range mounts {
		if m.(map[string]any)["name"] == "webhook-cert" {
			mountPath, _ = m.(map[string]any)["mountPath"].(string)
		}
	}
	for _, v := range volumes {
		if v.(map[string]any)["name"] == "webhook-cert" {
			mountedSecret, _, _ = unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		}
	}
	got := []any{slices.Contains(args, "--manage-webhook-certs=false"), slices.Contains(args, "--webhook-cert-dir="+mountPath), mountedSecret}
	if diff := cmp.Diff([]any{true, true, secretName}, got); diff != "" {
		t.Errorf("Deployment [rotation off, --webhook-cert-dir is the mount, mounted Secret] (-want +got):\n%s\nargs %v", diff, args)
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
