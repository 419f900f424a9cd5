package router

import (
	"context"
	"net/http"
	"net/netip"
)

// Target is a resolved destination: one Sandbox and an address of its Pod.
type Target struct {
	// Namespace and Name identify the Sandbox.
	Namespace, Name string
	// UID is the Sandbox's UID.
	UID string
	// Addr is the Pod IP and the requested port.
	Addr netip.AddrPort
}

// Resolver chooses the target of a request, or refuses it. The proxy never dials anything a
// Resolver did not return, so a Resolver that only knows Sandboxes keeps the router closed.
type Resolver interface {
	// Resolve returns the target of req, or an Error (usually a 404 naming the header at
	// fault). It must not block on the network: it runs on every request.
	Resolve(ctx context.Context, req Request) (Target, *Error)
	// Ready reports whether the resolver can answer (its cache has synced).
	Ready() bool
}

// Authorizer decides whether the caller of r may reach the Sandbox req names. It runs before
// resolution, so a caller who may not reach a Sandbox cannot learn whether it exists.
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request, req Request) *Error
}
