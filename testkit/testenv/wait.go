package testenv

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// Eventually polls cond every 50 ms until it returns nil, or fails the test with its last error
// once timeout has passed. Tests on a real API server wait for controllers this way rather than
// sleeping a guessed time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr is a loopback address with a port nobody listens on at the moment, for a server a
// test starts (a controller's metrics, a webhook).
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeLoopbackPort is FreePort for a TestMain, which has no testing.TB to fail.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ResetWebhookCertificates empties the conversion webhook's Secret and the CRDs' caBundle, as a
// fresh install of config/default has them, so a test sees the rotator start from nothing.
func ResetWebhookCertificates(t testing.TB, c client.Client) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: webhook.DefaultNamespace, Name: webhook.DefaultSecretName}, s); err != nil {
		t.Fatal(err)
	}
	s.Data = nil
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, name := range webhook.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
		if err := c.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
}
