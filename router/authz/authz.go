// Package authz lets RBAC decide who may reach which sandbox (--authz=kubernetes): the caller's
// bearer token is checked with a TokenReview, and the user it names with a SubjectAccessReview
// for verb "get" on the subresource sandboxes/proxy (group agents.x-k8s.io) of the Sandbox in
// its namespace, the way the API server itself guards pods/proxy. Decisions are cached briefly,
// keyed by a hash of the token, so a busy client costs the API server two reviews per TTL, not
// two per request.
package authz

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// The access the router asks about. Grant it with a Role such as
//
//	rules:
//	- apiGroups: ["agents.x-k8s.io"]
//	  resources: ["sandboxes/proxy"]
//	  verbs: ["get"]
//	  resourceNames: ["my-sandbox"]   # optional: one Sandbox only
const (
	Verb        = "get"
	Resource    = "sandboxes"
	Subresource = "proxy"
)

// Options configure the Kubernetes authorizer.
type Options struct {
	// Audiences the token must be issued for (TokenReview spec.audiences); empty means the
	// API server's own.
	Audiences []string
	// TTL is how long a decision (allowed, denied, or unauthenticated) is reused.
	TTL time.Duration
	// MaxEntries bounds the decision cache.
	MaxEntries int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultTTL is how long decisions are cached unless configured.
const DefaultTTL = 10 * time.Second

// Kubernetes is the --authz=kubernetes Authorizer.
type Kubernetes struct {
	client kubernetes.Interface
	opts   Options

	mu    sync.Mutex
	cache map[key]entry
}

type key struct {
	token           [sha256.Size]byte
	namespace, name string
}

type entry struct {
	err     *router.Error // nil: allowed
	expires time.Time
}

// New returns the authorizer; client needs create on tokenreviews and subjectaccessreviews.
func New(client kubernetes.Interface, o Options) *Kubernetes {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Kubernetes{client: client, opts: o, cache: map[key]entry{}}
}

// Authorize implements router.Authorizer.
func (k *Kubernetes) Authorize(ctx context.Context, r *http.Request, req router.Request) *router.Error {
	token, e := bearer(r.Header)
	if e != nil {
		return e
	}
	kk := key{token: sha256.Sum256([]byte(token)), namespace: req.Namespace, name: req.Name}
	now := k.opts.Now()
	k.mu.Lock()
	if en, ok := k.cache[kk]; ok && now.Before(en.expires) {
		k.mu.Unlock()
		return en.err
	}
	k.mu.Unlock()

	decision, transient := k.review(ctx, token, req)
	if transient {
		return decision // never cache an outage
	}
	k.mu.Lock()
	if len(k.cache) >= k.opts.MaxEntries {
		for ck, ce := range k.cache {
			if !now.Before(ce.expires) {
				delete(k.cache, ck)
			}
		}
		if len(k.cache) >= k.opts.MaxEntries {
			clear(k.cache)
		}
	}
	k.cache[kk] = entry{err: decision, expires: now.Add(k.opts.TTL)}
	k.mu.Unlock()
	return decision
}

// review asks the API server; transient is true when it could not answer.
func (k *Kubernetes) review(ctx context.Context, token string, req router.Request) (*router.Error, bool) {
	tr, err := k.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: k.opts.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return unavailable("TokenReview", err), true
	}
	if !tr.Status.Authenticated {
		msg := "the bearer token was not accepted by the API server"
		if tr.Status.Error != "" {
			msg += ": " + tr.Status.Error
		}
		return &router.Error{Status: http.StatusUnauthorized, Reason: router.ReasonUnauthenticated,
			Header: router.HeaderAuthorization, Detail: router.HeaderAuthorization + ": " + msg}, false
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := k.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: req.Namespace, Verb: Verb, Group: agentsv1beta1.GroupVersion.Group,
				Resource: Resource, Subresource: Subresource, Name: req.Name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return unavailable("SubjectAccessReview", err), true
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return &router.Error{Status: http.StatusForbidden, Reason: router.ReasonForbidden, Header: router.HeaderAuthorization,
			Detail: fmt.Sprintf("%s: user %q may not %s %s/%s %q in namespace %q", router.HeaderAuthorization,
				u.Username, Verb, Resource, Subresource, req.Name, req.Namespace)}, false
	}
	return nil, false
}

func unavailable(what string, err error) *router.Error {
	return &router.Error{Status: http.StatusServiceUnavailable, Reason: router.ReasonAuthorizationUnavailable,
		Detail: fmt.Sprintf("could not check the caller: %s failed: %v", what, err)}
}

// bearer extracts the token of "Authorization: Bearer <token>".
func bearer(h http.Header) (string, *router.Error) {
	vs := h.Values(router.HeaderAuthorization)
	bad := func(msg string) (string, *router.Error) {
		return "", &router.Error{Status: http.StatusUnauthorized, Reason: router.ReasonUnauthenticated,
			Header: router.HeaderAuthorization, Detail: router.HeaderAuthorization + ": " + msg}
	}
	switch {
	case len(vs) == 0:
		return bad("Required value: a bearer token (this router runs with --authz=kubernetes)")
	case len(vs) > 1:
		return bad("Duplicate value: sent more than once")
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return bad("Invalid value: must be \"Bearer <token>\"")
	}
	return token, nil
}
