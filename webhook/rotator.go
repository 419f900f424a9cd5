package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandbox-gitops/sandbox-gitops/webhook/certs"
)

// The rotator's permissions. The Secret is shipped (empty) by config/webhook, so the
// controller only reads and updates that one Secret; of the CRDs it patches only these four,
// and only their caBundle.
// +kubebuilder:rbac:groups="",namespace=sandbox-gitops-system,resources=secrets,verbs=get;update,resourceNames=sandbox-gitops-webhook-cert
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=sandboxes.agents.x-k8s.io;sandboxtemplates.extensions.agents.x-k8s.io;sandboxclaims.extensions.agents.x-k8s.io;sandboxwarmpools.extensions.agents.x-k8s.io

// CRDs are the CustomResourceDefinitions whose conversion the webhook serves.
var CRDs = []string{
	"sandboxes.agents.x-k8s.io",
	"sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io",
	"sandboxwarmpools.extensions.agents.x-k8s.io",
}

// Defaults of Options, as config/ installs the controller.
const (
	DefaultNamespace   = "sandbox-gitops-system"
	DefaultServiceName = "sandbox-gitops-webhook-service"
	DefaultSecretName  = "sandbox-gitops-webhook-cert"
	DefaultInterval    = time.Minute
)

// Options say where the API server reaches the webhook and where its certificates live.
type Options struct {
	// Namespace and ServiceName name the Service the CRDs' conversion stanza points at; the
	// serving certificate is made for <service>.<namespace>.svc.
	Namespace, ServiceName string
	// SecretName is the Secret in Namespace that holds the CA and the serving certificate, shared
	// by every replica. config/webhook ships it empty.
	SecretName string
	// Hosts, when set, are the names in the serving certificate instead (a webhook reached by
	// URL, such as one on a workstation).
	Hosts []string
	// CRDs whose caBundle is kept; default the four of CRDs.
	CRDs []string
	// Interval between checks of the Secret and the CRDs (default one minute).
	Interval time.Duration
	// Policy is how long certificates live (default certs.DefaultPolicy).
	Policy certs.Policy
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if len(o.Hosts) == 0 {
		o.Hosts = []string{o.ServiceName + "." + o.Namespace + ".svc"}
	}
	if o.CRDs == nil {
		o.CRDs = CRDs
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Policy == (certs.Policy{}) {
		o.Policy = certs.DefaultPolicy
	}
	return o
}

// Rotator makes the webhook's CA and serving certificate, renews them before they expire,
// keeps every CRD's caBundle equal to the CA bundle, and hands the serving certificate to the
// webhook server from memory (no files, so the root filesystem stays read-only and a renewed
// certificate is served at once). Every replica runs one: they share the Secret, and whichever
// renews first wins the update; the others read its result. A replica serves a new
// certificate only once every CRD trusts the CA that signed it.
type Rotator struct {
	opts   Options
	client client.Client
	log    logr.Logger
	now    func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	issuer   []byte            // the raw CA certificate that signed cert
	verified map[string]string // CRD name → the resourceVersion seen with the current bundle
	bundle   [32]byte          // hash of the bundle verified
	lastErr  string
}

// NewRotator makes a rotator that talks to the API server of cfg with a client of its own (no
// cache: it reads one Secret and four CRDs once a minute).
func NewRotator(cfg *rest.Config, opts Options) (*Rotator, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	return &Rotator{
		opts: opts.withDefaults(), client: c, log: ctrl.Log.WithName("webhook-certificates"),
		now: time.Now, verified: map[string]string{},
	}, nil
}

// TLSConfig makes the webhook server take its certificate from the rotator; pass it in
// controller-runtime's webhook.Options.TLSOpts.
func (r *Rotator) TLSConfig(c *tls.Config) {
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.cert == nil {
			return nil, errors.New("no webhook serving certificate yet")
		}
		return r.cert, nil
	}
}

// Ready is a readiness check: ready once a serving certificate is loaded. Problems with the
// CRDs are logged with what to do; they do not take a replica out of the Service, since the
// CRDs that were patched convert fine.
func (r *Rotator) Ready(*http.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert == nil {
		if r.lastErr != "" {
			return fmt.Errorf("no webhook serving certificate yet: %s", r.lastErr)
		}
		return errors.New("no webhook serving certificate yet")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the webhook, so every replica needs the
// certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start checks at once, then every Interval (every few seconds while something fails), until ctx
// ends.
func (r *Rotator) Start(ctx context.Context) error {
	r.log.Info("managing the webhook's certificates", "secret", r.opts.Namespace+"/"+r.opts.SecretName, "hosts", r.opts.Hosts, "crds", r.opts.CRDs)
	for {
		wait := r.opts.Interval
		if err := r.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.report(err)
			wait = min(wait, 5*time.Second)
		} else {
			r.report(nil)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// report logs an error when it first appears or changes, and its end, so a problem that
// persists is not logged every few seconds.
func (r *Rotator) report(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil && r.lastErr != "":
		r.log.Info("webhook certificates are in order again")
		r.lastErr = ""
	case err != nil && err.Error() != r.lastErr:
		r.log.Error(err, "keeping the webhook's certificates")
		r.lastErr = err.Error()
	}
}

// Sync is one check: renew what is due in the Secret, publish the CA bundle in every CRD, then
// serve the Secret's certificate.
func (r *Rotator) Sync(ctx context.Context) error {
	secret, err := r.secret(ctx)
	if err != nil {
		return err
	}
	next, reason, err := certs.Plan(r.now(), secret.Data, r.opts.Hosts, r.opts.Policy)
	if err != nil {
		return err
	}
	if reason != "" {
		secret.Data = next
		if err := r.client.Update(ctx, secret); err != nil {
			// A conflict means another replica renewed first: the next check reads its result.
			return fmt.Errorf("updating Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
		}
		r.log.Info("renewed the webhook's certificates", "why", reason)
	}
	bundle := secret.Data[certs.CABundleKey]
	var errs []error
	for _, name := range r.opts.CRDs {
		if err := r.publish(ctx, name, bundle); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.serve(secret.Data, len(errs) == 0); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// secret reads the Secret, creating it if it is missing and the controller may.
func (r *Rotator) secret(ctx context.Context) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	s := &corev1.Secret{}
	err := r.client.Get(ctx, key, s)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		return s, nil
	}
	s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque}
	if cerr := r.client.Create(ctx, s); cerr != nil {
		return nil, fmt.Errorf("Secret %s does not exist and cannot be created (%v): config/default installs it empty for the controller to fill; "+
			"apply config/default, create it, or run with --manage-webhook-certs=false", key, cerr)
	}
	return s, nil
}

// publish makes the CRD's caBundle equal to bundle. A CRD already checked is looked at only
// through its metadata, unless it or the bundle changed since.
func (r *Rotator) publish(ctx context.Context, name string, bundle []byte) error {
	sum := sha256.Sum256(bundle)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, meta); err != nil {
		return crdError(name, err)
	}
	r.mu.Lock()
	seen := r.bundle == sum && r.verified[name] == meta.ResourceVersion
	r.mu.Unlock()
	if seen {
		return nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return crdError(name, err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return fmt.Errorf("CRD %s does not send conversions to a webhook: install the CRDs from config/crd (config/default does), "+
			"whose conversion stanza points at this webhook", name)
	}
	if !bytes.Equal(conv.Webhook.ClientConfig.CABundle, bundle) {
		before := crd.DeepCopy()
		crd.Spec.Conversion.Webhook.ClientConfig.CABundle = bundle
		// With the resourceVersion read above: another writer of the CRD in between (a GitOps
		// apply of config/crd, a second replica) makes this a conflict and the next pass reads
		// again, instead of a patch built on a stale read.
		if err := r.client.Patch(ctx, crd, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("setting the caBundle of CRD %s: %w", name, err)
		}
		r.log.Info("published the webhook's CA bundle", "crd", name)
	}
	r.mu.Lock()
	if r.bundle != sum {
		r.bundle, r.verified = sum, map[string]string{}
	}
	r.verified[name] = crd.ResourceVersion
	r.mu.Unlock()
	return nil
}

func crdError(name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("CRD %s is not installed: install config/crd (config/default does)", name)
	}
	return fmt.Errorf("reading CRD %s: %w", name, err)
}

// serve switches to the Secret's serving certificate. A certificate from another CA than the
// one served now waits until every CRD trusts that CA (trusted), unless nothing usable is
// served yet.
func (r *Rotator) serve(data map[string][]byte, trusted bool) error {
	cert, err := tls.X509KeyPair(data[certs.CertKey], data[certs.KeyKey])
	if err != nil {
		return fmt.Errorf("the serving certificate in Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	cert.Leaf = leaf
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && bytes.Equal(r.cert.Certificate[0], cert.Certificate[0]) {
		return nil
	}
	sameIssuer := bytes.Equal(r.issuer, leaf.RawIssuer)
	if r.cert != nil && !trusted && !sameIssuer && r.now().Before(r.cert.Leaf.NotAfter) {
		return nil
	}
	r.cert, r.issuer = &cert, leaf.RawIssuer
	return nil
}
