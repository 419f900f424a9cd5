package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/config/crd"
	"github.com/sandbox-gitops/sandbox-gitops/manifest"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// The suite runs one real kube-apiserver and etcd. The CRDs are config/crd's, except that their
// conversion goes to https://127.0.0.1:<webhookPort>/convert (envtest has no Service routing)
// and they carry no caBundle: the rotator under test has to publish one. Everything else of
// config/default (RBAC, the webhook's Secret and Service) is installed as it is, and every
// webhook runs as the controller's ServiceAccount with exactly that RBAC. Tests run one after
// another, each with its own webhook on the one port.
var (
	admin        client.Client
	adminConfig  *rest.Config
	asController *rest.Config
	webhookPort  int
	scheme       = runtime.NewScheme()
	nsCounter    atomic.Int32
)

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		agentsv1alpha1.AddToScheme, agentsv1beta1.AddToScheme, extv1alpha1.AddToScheme, extv1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	env, err := testenv.NewEnvironment()
	if err != nil {
		testenv.SkipMain(err)
	}
	env.CRDs = nil // installed below, with the conversion stanza this suite needs
	cfg, err := env.Start()
	if err != nil { // Start stopped what it started
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the API server: %v\n", err)
			}
		}()
		if err := setup(env, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "setting up the suite: %v\n", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func zapLevel() zapcore.Level {
	if os.Getenv("WEBHOOK_TEST_LOG") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

func setup(env *testenv.Environment, cfg *rest.Config) error {
	var err error
	adminConfig = cfg
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if webhookPort, err = testenv.FreeLoopbackPort(); err != nil {
		return err
	}
	crds, err := crd.All()
	if err != nil {
		return err
	}
	for _, c := range crds {
		if c.Spec.Conversion == nil {
			continue // SandboxRender: one version
		}
		c.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: conversionURL()}
	}
	if err := testenv.InstallCRDs(cfg, crds); err != nil {
		return err
	}
	objs, err := configDefault()
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition", "Deployment":
			continue // the CRDs are installed above; no Deployment runs in envtest
		}
		if err := admin.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s from config/default: %w", o.GetKind(), o.GetName(), err)
		}
	}
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:sandbox-gitops-system:sandbox-gitops-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sandbox-gitops-system", "system:authenticated"},
	}, nil)
	if err != nil {
		return err
	}
	asController = user.Config()
	return nil
}

// configDefault is `kustomize build config/default`, with the kustomize make tools built.
func configDefault() ([]*unstructured.Unstructured, error) {
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kustomize"), "build", filepath.Join(testenv.RepoRoot(), "config", "default")).Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/default: %w", err)
	}
	return manifest.Parse("config/default", out)
}

// conversionURL is where the suite's CRDs send conversions: the one webhook port.
func conversionURL() *string {
	return ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, webhook.Path))
}

// running is one webhook as sandbox-controller runs it: a manager (as the controller's
// ServiceAccount) with the webhook server and, unless opts is nil, the rotator.
type running struct {
	rotator *webhook.Rotator
	probes  string
}

// startWebhook runs a webhook on webhookPort until the test ends, and waits until it is ready.
// With opts it makes its own certificates; without, it reads them from certDir.
func startWebhook(t *testing.T, opts *webhook.Options, certDir string) *running {
	t.Helper()
	var rot *webhook.Rotator
	if opts != nil {
		var err error
		if rot, err = webhook.NewRotator(asController, *opts); err != nil {
			t.Fatal(err)
		}
	}
	r := &running{rotator: rot, probes: testenv.FreeAddr(t)}
	mgr, err := ctrl.NewManager(asController, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: r.probes,
		WebhookServer:          webhook.NewServer(webhookPort, certDir, rot),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.Setup(mgr, rot); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the webhook's manager: %v", err)
		}
	})
	eventually(t, time.Minute, "the webhook to be ready", func() error { return r.ready() })
	return r
}

// ready asks the replica's /readyz, as the kubelet would.
func (r *running) ready() error {
	resp, err := http.Get("http://" + r.probes + "/readyz?verbose")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz %d: %s", resp.StatusCode, body.String())
	}
	return nil
}

// servedCertificate is the certificate the webhook presents now.
func servedCertificate(t *testing.T) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the presented certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

var eventually = testenv.Eventually

func newNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("wh%d", nsCounter.Add(1))
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// secretData is the rotator's Secret as it is now.
func secretData(t testing.TB) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// caBundles is each CRD's conversion caBundle.
func caBundles(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range webhook.CRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
			t.Fatal(err)
		}
		out[name] = string(c.Spec.Conversion.Webhook.ClientConfig.CABundle)
	}
	return out
}
