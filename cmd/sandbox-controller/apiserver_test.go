package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
	"github.com/sandbox-gitops/sandbox-gitops/webhook/certs"
)

// TestRunAgainstAnAPIServer runs the built command on a real API server, as
// the controller's ServiceAccount with config/default's RBAC, its Secret and Service installed
// and the CRDs' conversion pointed at the webhook port (envtest routes no Services). By default
// the controller serves the conversion webhook with a certificate it made and published in the
// CRDs; with --enable-webhook=false it reconciles without one, touching neither the Secret nor
// the CRDs, and v1alpha1 requests fail naming the webhook.
func TestRunAgainstAnAPIServer(t *testing.T) {
	testenv.Tool(t, "kube-apiserver")
	testenv.Tool(t, "etcd")
	kustomize := testenv.Tool(t, "kustomize")
	env, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDs = nil
	cfg := env.StartForTest(t)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, agentsv1alpha1.AddToScheme, agentsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	webhookPort := testenv.FreePort(t)
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		if c.Spec.Conversion == nil {
			continue // SandboxRender: one version
		}
		c.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort))}
	}
	if err := testenv.InstallCRDs(cfg, crds); err != nil {
		t.Fatal(err)
	}
	install(t, admin, kustomize)
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:sandbox-gitops-system:sandbox-gitops-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sandbox-gitops-system", "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	binary := buildBinary(t)
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		args        []string
		wantWebhook bool
	}{
		"default":                {args: []string{"--webhook-cert-hosts=127.0.0.1"}, wantWebhook: true},
		"--enable-webhook=false": {args: []string{"--enable-webhook=false"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			testenv.ResetWebhookCertificates(t, admin)
			ns := "t-" + strings.Trim(strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' {
					return r
				}
				return '-'
			}, name), "-")
			if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			probes := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			args := append([]string{
				"--kubeconfig=" + kubeconfigPath, "--namespaces=" + ns, "--metrics-bind-address=0",
				"--health-probe-bind-address=" + probes, fmt.Sprintf("--webhook-port=%d", webhookPort), "--zap-log-level=error",
			}, tc.args...)
			cmd := exec.Command(binary, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := testenv.StartProcess(cmd); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case err := <-exited:
					if err != nil {
						t.Errorf("after SIGTERM: %v, want exit 0:\n%s", err, stderr.String())
					}
				case <-time.After(30 * time.Second):
					_ = cmd.Process.Kill()
					t.Error("the controller did not stop within 30 s of SIGTERM")
				}
			}()
			testenv.Eventually(t, time.Minute, "the controller to be ready", func() error {
				select {
				case err := <-exited:
					t.Fatalf("the controller exited: %v\n%s", err, stderr.String())
				default:
				}
				return readyz(probes)
			})

			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: ns}}
			sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
			if err := admin.Create(ctx, sb); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, time.Minute, "the controller to create the Sandbox's Pod", func() error {
				return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "box"}, &corev1.Pod{})
			})

			alphaErr := admin.Get(ctx, client.ObjectKeyFromObject(sb), &agentsv1alpha1.Sandbox{})
			secret := &corev1.Secret{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, secret); err != nil {
				t.Fatal(err)
			}
			bundles := caBundles(t, admin)
			_, dialErr := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), time.Second)
			if tc.wantWebhook {
				if alphaErr != nil {
					t.Errorf("reading the Sandbox as v1alpha1: %v", alphaErr)
				}
				for crdName, b := range bundles {
					if len(b) == 0 || !bytes.Equal(b, secret.Data[certs.CABundleKey]) {
						t.Errorf("CRD %s: caBundle is not the CA the controller made in its Secret", crdName)
					}
				}
				return
			}
			if alphaErr == nil || !strings.Contains(alphaErr.Error(), "conversion webhook") {
				t.Errorf("a v1alpha1 read without the webhook: %v, want a failed conversion webhook call", alphaErr)
			}
			if dialErr == nil {
				t.Error("something listens on the webhook port with --enable-webhook=false")
			}
			if len(secret.Data) != 0 {
				t.Errorf("the Secret was filled with --enable-webhook=false: %v keys", len(secret.Data))
			}
			for crdName, b := range bundles {
				if len(b) != 0 {
					t.Errorf("CRD %s got a caBundle with --enable-webhook=false", crdName)
				}
			}
		})
	}
}

// buildBinary builds sandbox-controller into the test's temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sandbox-controller")
	if b, err := exec.Command("go", "build", "-o", out, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// install creates what config/default holds, except the CRDs (installed pointing at the
// webhook port) and the Deployment (the test runs the command itself).
func install(t *testing.T, admin client.Client, kustomize string) {
	t.Helper()
	out, err := exec.Command(kustomize, "build", filepath.Join(testenv.RepoRoot(), "config", "default")).Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatal(err)
		}
		if k := u.GetKind(); k == "CustomResourceDefinition" || k == "Deployment" || len(u.Object) == 0 {
			continue
		}
		if err := admin.Create(context.Background(), u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func caBundles(t *testing.T, admin client.Client) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range webhook.CRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
			t.Fatal(err)
		}
		out[name] = c.Spec.Conversion.Webhook.ClientConfig.CABundle
	}
	return out
}

func readyz(addr string) error {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// TestRunWithoutCRDs: on a real API server without the CRDs the controller exits 1 at once with
// one line that says to install them, naming the command, instead of a manager error.
func TestRunWithoutCRDs(t *testing.T) {
	testenv.Tool(t, "kube-apiserver")
	testenv.Tool(t, "etcd")
	env, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDs = nil
	env.StartForTest(t)
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kubeconfig", path, "--health-probe-bind-address", "0"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	checkExitLine(t, stderr.String(), "does not serve agents.x-k8s.io/v1beta1", "CRDs are not installed", "install.yaml", "config/default")
}
