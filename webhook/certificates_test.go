package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1alpha1"
	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
	"github.com/sandbox-gitops/sandbox-gitops/webhook"
	"github.com/sandbox-gitops/sandbox-gitops/webhook/certs"
)

var local = []string{"127.0.0.1"}

// TestRotatorPublishesItsCA: from an empty Secret and CRDs without a caBundle (what
// `kubectl apply -k config/default` leaves), the controller's rotator makes the certificates,
// publishes the CA in every CRD and serves the certificate, and v1alpha1 works.
func TestRotatorPublishesItsCA(t *testing.T) {
	testenv.ResetWebhookCertificates(t, admin)
	if _, err := readAsV1alpha1(t, newSandbox(t)); err == nil {
		t.Fatal("a v1alpha1 read worked with no webhook running: the test cannot tell")
	}
	startWebhook(t, &webhook.Options{Hosts: local}, "")
	data := secretData(t)
	want := map[string]string{}
	for _, name := range webhook.CRDs {
		want[name] = string(data[certs.CABundleKey])
	}
	if diff := cmp.Diff(want, caBundles(t)); diff != "" {
		t.Errorf("the CRDs' caBundle is not the Secret's CA bundle (-want +got):\n%s", diff)
	}
	if block, _ := pem.Decode(data[certs.CertKey]); block == nil || !bytes.Equal(block.Bytes, servedCertificate(t)) {
		t.Error("the webhook does not serve the Secret's certificate")
	}
	if _, err := readAsV1alpha1(t, newSandbox(t)); err != nil {
		t.Errorf("reading a Sandbox as v1alpha1: %v", err)
	}
}

// TestReplicasShareOneCertificate: replicas starting together on an empty Secret settle on one
// CA and certificate (whoever writes first wins; the other reads it), and a replica joining
// later writes nothing.
func TestReplicasShareOneCertificate(t *testing.T) {
	testenv.ResetWebhookCertificates(t, admin)
	ctx := context.Background()
	replicas := []*webhook.Rotator{newRotator(t, webhook.Options{Hosts: local}), newRotator(t, webhook.Options{Hosts: local})}
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() { _ = r.Sync(ctx) }) // one of them may lose the race for the Secret
	}
	wg.Wait()
	for i, r := range replicas {
		if err := r.Sync(ctx); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	data := secretData(t)
	block, _ := pem.Decode(data[certs.CertKey])
	for i, r := range replicas {
		if got := served(t, r); !bytes.Equal(got, block.Bytes) {
			t.Errorf("replica %d serves another certificate than the Secret's", i)
		}
	}
	before := resourceVersions(t)
	late := newRotator(t, webhook.Options{Hosts: local})
	if err := late.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, resourceVersions(t)); diff != "" {
		t.Errorf("a replica joining later wrote (-before +after):\n%s", diff)
	}
}

// TestRotationKeepsConverting: with lifetimes of seconds, the rotator renews the serving
// certificate several times and the CA once, while a client reads as v1alpha1 ten times a
// second: not one read fails.
//
// Each certificate is renewed when a third of its life is left, and that third is all the time
// the rotator has to check, write the Secret, patch four CRDs and serve the result: on a loaded
// machine that took several seconds (a 6 s certificate, renewed 2 s before its end, expired
// first). So the lifetimes leave 8 s (serving) and 16 s (CA) for it, and the test reads until it
// has seen the renewals rather than for a fixed time.
func TestRotationKeepsConverting(t *testing.T) {
	testenv.ResetWebhookCertificates(t, admin)
	const (
		certValidity = 24 * time.Second
		caValidity   = 48 * time.Second
		// About 35 s on an idle machine: the CA is renewed 32 s in, and the certificate it signs
		// is served a check later, the third served.
		patience = 3 * time.Minute
	)
	r := startWebhook(t, &webhook.Options{
		Hosts: local, Interval: 500 * time.Millisecond,
		Policy: certs.Policy{CAValidity: caValidity, CertValidity: certValidity},
	}, "")
	sb := newSandbox(t)
	servedCerts, cas := map[string]bool{}, map[string]bool{}
	var failures []string
	start := time.Now()
	for ; len(servedCerts) < 3 || len(cas) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > patience {
			t.Fatalf("served %d certificates from %d CAs in %v; want at least 3 from 2 (%d v1alpha1 reads failed meanwhile)", len(servedCerts), len(cas), patience, len(failures))
		}
		if _, err := readAsV1alpha1(t, sb); err != nil {
			failures = append(failures, err.Error())
		}
		servedCerts[string(servedCertificate(t))] = true
		if block, _ := pem.Decode(secretData(t)[certs.CABundleKey]); block != nil {
			cas[string(block.Bytes)] = true
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d v1alpha1 reads failed during rotation, the first: %s", len(failures), failures[0])
	}
	if err := r.ready(); err != nil {
		t.Error(err)
	}
}

// TestRotatorSaysWhatToDo: what keeps the rotator from working is an error that names the
// object and the fix.
func TestRotatorSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		opts  webhook.Options
		admin bool
		// break and mend put the cluster in the state under test and back.
		breakIt, mend func(t *testing.T)
		want          []string
	}{
		"Secret deleted": {
			breakIt: func(t *testing.T) { deleteSecret(t) },
			mend:    func(t *testing.T) { createSecret(t) },
			want:    []string{"Secret sandbox-gitops-system/sandbox-gitops-webhook-cert does not exist and cannot be created", "apply config/default"},
		},
		"CRD not installed": {
			opts: webhook.Options{Hosts: local, CRDs: []string{"widgets.example.com"}}, admin: true,
			want: []string{"CRD widgets.example.com is not installed: install config/crd"},
		},
		"CRD without the conversion stanza": {
			opts: webhook.Options{Hosts: local, CRDs: []string{"sandboxes.agents.x-k8s.io"}},
			breakIt: func(t *testing.T) {
				setConversion(t, "sandboxes.agents.x-k8s.io", &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter})
			},
			mend: func(t *testing.T) {
				setConversion(t, "sandboxes.agents.x-k8s.io", &apiextensionsv1.CustomResourceConversion{
					Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
						ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: conversionURL()}},
				})
			},
			want: []string{"CRD sandboxes.agents.x-k8s.io does not send conversions to a webhook", "config/crd"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.opts.Hosts == nil {
				tc.opts.Hosts = local
			}
			if tc.breakIt != nil {
				tc.breakIt(t)
				t.Cleanup(func() { tc.mend(t) })
			}
			cfg := asController
			if tc.admin {
				cfg = adminConfig
			}
			r, err := webhook.NewRotator(cfg, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Sync(ctx)
			if err == nil || !hasKey(err.Error(), tc.want...) {
				t.Errorf("error %v; want one saying %q", err, tc.want)
			}
		})
	}
}

// TestCertificatesFromFiles: with --manage-webhook-certs=false (cert-manager) the webhook serves
// tls.crt and tls.key from its certificate directory and touches neither the Secret nor the
// CRDs; the caBundle is someone else's to write (here the test, as cert-manager's CA injector).
func TestCertificatesFromFiles(t *testing.T) {
	testenv.ResetWebhookCertificates(t, admin)
	data, _, err := certs.Plan(time.Now(), nil, local, certs.DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{certs.CertKey, certs.KeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range webhook.CRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
			t.Fatal(err)
		}
		before := c.DeepCopy()
		c.Spec.Conversion.Webhook.ClientConfig.CABundle = data[certs.CABundleKey]
		if err := admin.Patch(context.Background(), c, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	before := resourceVersions(t)
	startWebhook(t, nil, dir)
	if _, err := readAsV1alpha1(t, newSandbox(t)); err != nil {
		t.Errorf("reading a Sandbox as v1alpha1: %v", err)
	}
	if diff := cmp.Diff(before, resourceVersions(t)); diff != "" {
		t.Errorf("the webhook wrote with --manage-webhook-certs=false (-before +after):\n%s", diff)
	}
}

func newRotator(t *testing.T, opts webhook.Options) *webhook.Rotator {
	t.Helper()
	r, err := webhook.NewRotator(asController, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// served is the certificate a rotator hands to the TLS server.
func served(t *testing.T, r *webhook.Rotator) []byte {
	t.Helper()
	c := &tls.Config{}
	r.TLSConfig(c)
	cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Certificate[0]
}

// resourceVersions of the Secret and the CRDs: any write changes one.
func resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	s := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, s); err != nil {
		t.Fatal(err)
	}
	out["Secret"] = s.ResourceVersion
	for _, name := range webhook.CRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			t.Fatal(err)
		}
		out[name] = c.ResourceVersion
	}
	return out
}

// newSandbox creates a v1beta1 Sandbox in a namespace of its own.
func newSandbox(t *testing.T) *agentsv1beta1.Sandbox {
	t.Helper()
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: newNamespace(t)}}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	if err := admin.Create(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func readAsV1alpha1(t *testing.T, sb *agentsv1beta1.Sandbox) (*agentsv1alpha1.Sandbox, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := &agentsv1alpha1.Sandbox{}
	return out, admin.Get(ctx, client.ObjectKeyFromObject(sb), out)
}

func deleteSecret(t *testing.T) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}}
	if err := admin.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func createSecret(t *testing.T) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, Type: corev1.SecretTypeOpaque}
	if err := admin.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func setConversion(t *testing.T, name string, conv *apiextensionsv1.CustomResourceConversion) {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Conversion = conv
	if err := admin.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func hasKey(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
