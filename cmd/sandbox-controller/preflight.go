package main

import (
	"errors"
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/cli"
)

// installHint is how the CRDs get into a cluster.
const installHint = "install them first: kubectl apply --server-side -f install.yaml (a release), or ./bin/kustomize build config/default | kubectl apply --server-side -f -"

// preflight asks the API server, before anything starts, whether it answers and serves our
// CRDs, so that a wrong kubeconfig or a cluster without the CRDs is one line saying what to do
// rather than a manager's error deep in its start. Discovery is open to every authenticated
// identity (system:discovery), so this needs no RBAC of its own.
func preflight(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, gv := range []string{agentsv1beta1.GroupVersion.String(), extv1beta1.GroupVersion.String(), renderv1alpha1.GroupVersion.String()} {
		_, err := dc.ServerResourcesForGroupVersion(gv)
		switch {
		case err == nil:
			continue
		case apierrors.IsNotFound(err):
			return fmt.Errorf("the API server at %s does not serve %s: the CRDs are not installed (the four agent-sandbox ones and SandboxRender); %s", cfg.Host, gv, installHint)
		case apierrors.IsUnauthorized(err):
			return fmt.Errorf("the API server at %s refused our credentials (%v): check --kubeconfig (or KUBECONFIG) and its user", cfg.Host, err)
		case isConnectionError(err):
			return fmt.Errorf("cannot reach the API server at %s (%v): check --kubeconfig (or KUBECONFIG), its server address, and that the server is up", cfg.Host, err)
		default:
			return fmt.Errorf("asking the API server at %s for %s: %w", cfg.Host, gv, err)
		}
	}
	return nil
}

// isConnectionError: the request never got an HTTP answer (refused, timed out, no such host,
// a TLS failure), which client-go reports as a *url.Error.
func isConnectionError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// fail is a start-up failure: run prints it in one line a person can act on, with no stack
// trace, and exits 1.
func fail(what string, err error) error {
	return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%s: %w", what, err)}
}
