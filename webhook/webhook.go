package webhook

import (
	"crypto/tls"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// NewServer is the webhook server for a manager's Options.WebhookServer. With a rotator it takes
// its certificate from memory; without one (certificates made by cert-manager or by hand) from
// tls.crt and tls.key in certDir, reloaded when they change. An empty certDir is
// controller-runtime's default, /tmp/k8s-webhook-server/serving-certs.
func NewServer(port int, certDir string, r *Rotator) crwebhook.Server {
	opts := crwebhook.Options{Port: port, CertDir: certDir}
	if r != nil {
		opts.TLSOpts = []func(*tls.Config){r.TLSConfig}
	}
	return crwebhook.NewServer(opts)
}

// Setup serves the conversion webhook at Path on mgr's webhook server and, with a rotator, runs
// it in mgr. The replica is ready once the webhook answers TLS (and, with a rotator, once it has
// a certificate).
func Setup(mgr ctrl.Manager, r *Rotator) error {
	h, err := Handler()
	if err != nil {
		return fmt.Errorf("setting up the conversion webhook: %w", err)
	}
	srv := mgr.GetWebhookServer()
	srv.Register(Path, h)
	if r != nil {
		if err := mgr.Add(r); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", r.Ready); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("webhook", srv.StartedChecker())
}
