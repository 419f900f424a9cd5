// Package router is the sandbox router: the one way into a sandbox. It keeps upstream
// agent-sandbox's header contract (X-Sandbox-ID, -Namespace, -Port, -UID, -Pod-IP) and closes
// upstream's two holes: a target must be a Ready Sandbox known to the informer cache (never a DNS
// guess), and callers may be authorised by the Kubernetes API.
//
// The package only moves bytes. Choosing the target is a Resolver's job (package
// router/resolve), deciding whether the caller may reach it an Authorizer's (package
// router/authz); both are injected, so the proxy is tested in process against httptest
// backends and the decisions are tested on their own against a real API server.
package router
