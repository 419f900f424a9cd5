package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandbox-gitops/sandbox-gitops/webhook"
)

// webhookFlags configure the conversion webhook that serves v1alpha1. The names are upstream's
// (--enable-webhook, --manage-webhook-certs, --webhook-port, --webhook-cert-dir,
// --webhook-service-name, --webhook-namespace) plus two of ours.
type webhookFlags struct {
	enable, manageCerts bool
	port                int
	certDir             string
	service, namespace  string
	secret, hosts       string
}

func (w *webhookFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&w.enable, "enable-webhook", true, "serve the CRDs' conversion webhook (v1alpha1 <-> v1beta1); without it v1alpha1 requests fail")
	fs.BoolVar(&w.manageCerts, "manage-webhook-certs", true, "make and renew the webhook's certificate in --webhook-cert-secret and keep the CRDs' caBundle up to date; false: read tls.crt and tls.key from --webhook-cert-dir (cert-manager)")
	fs.IntVar(&w.port, "webhook-port", 9443, "port the conversion webhook listens on (HTTPS)")
	fs.StringVar(&w.certDir, "webhook-cert-dir", "", "directory with tls.crt and tls.key, with --manage-webhook-certs=false (default /tmp/k8s-webhook-server/serving-certs)")
	fs.StringVar(&w.service, "webhook-service-name", webhook.DefaultServiceName, "the webhook's Service, named in the CRDs' conversion stanza; the certificate is made for <service>.<namespace>.svc")
	fs.StringVar(&w.namespace, "webhook-namespace", webhook.DefaultNamespace, "namespace of the webhook's Service and certificate Secret")
	fs.StringVar(&w.secret, "webhook-cert-secret", webhook.DefaultSecretName, "Secret the managed CA and serving certificate are kept in, shared by the replicas (the RBAC names it)")
	fs.StringVar(&w.hosts, "webhook-cert-hosts", "", "comma-separated names and IPs for the managed serving certificate instead of the Service's (a webhook reached by URL)")
}

func (w *webhookFlags) validate() error {
	if !w.enable {
		return nil
	}
	if w.port < 1 || w.port > 65535 {
		return fmt.Errorf("--webhook-port %d: want 1-65535", w.port)
	}
	if w.service == "" || w.namespace == "" || w.secret == "" {
		return fmt.Errorf("--webhook-service-name, --webhook-namespace and --webhook-cert-secret must not be empty")
	}
	return nil
}

// webhookServer is the manager's webhook server and the rotator that feeds it, or nothing with
// --enable-webhook=false (then the manager starts no webhook server at all).
func (w *webhookFlags) server(cfg *rest.Config) (crwebhook.Server, *webhook.Rotator, error) {
	if !w.enable {
		return nil, nil, nil
	}
	var rot *webhook.Rotator
	if w.manageCerts {
		var err error
		rot, err = webhook.NewRotator(cfg, webhook.Options{
			Namespace: w.namespace, ServiceName: w.service, SecretName: w.secret, Hosts: splitList(w.hosts),
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return webhook.NewServer(w.port, w.certDir, rot), rot, nil
}

func (w *webhookFlags) setup(mgr ctrl.Manager, rot *webhook.Rotator) error {
	if !w.enable {
		return nil
	}
	return webhook.Setup(mgr, rot)
}
