package router

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Reasons are the machine-readable causes of a refusal, part of the contract with SDKs and
// dashboards (the reason label of sandbox_router_refusals_total), so they never change.
const (
	// ReasonInvalidHeader: a routing header is missing or malformed (400).
	ReasonInvalidHeader = "InvalidHeader"
	// ReasonNamespaceNotServed: the namespace is outside --namespaces (404).
	ReasonNamespaceNotServed = "NamespaceNotServed"
	// ReasonSandboxNotFound: no Sandbox of that name (or UID) exists in the namespace (404).
	ReasonSandboxNotFound = "SandboxNotFound"
	// ReasonSandboxNotReady: the Sandbox exists but is not Ready or has no running Pod (404).
	ReasonSandboxNotReady = "SandboxNotReady"
	// ReasonPodIPMismatch: X-Sandbox-Pod-IP is not an IP of the Sandbox's Pod (404).
	ReasonPodIPMismatch = "PodIPMismatch"
	// ReasonUnauthenticated: --authz=kubernetes and no valid bearer token (401).
	ReasonUnauthenticated = "Unauthenticated"
	// ReasonForbidden: the caller may not reach this Sandbox (403).
	ReasonForbidden = "Forbidden"
	// ReasonAuthorizationUnavailable: the API server could not be asked (503).
	ReasonAuthorizationUnavailable = "AuthorizationUnavailable"
	// ReasonRouterNotReady: the informer cache has not synced yet (503).
	ReasonRouterNotReady = "RouterNotReady"
	// ReasonUpstreamUnreachable: every dial to the Pod failed (502).
	ReasonUpstreamUnreachable = "UpstreamUnreachable"
	// ReasonUpstreamTimeout: the Pod did not answer within the proxy timeout (504).
	ReasonUpstreamTimeout = "UpstreamTimeout"
	// ReasonUpstreamError: the connection to the Pod failed after it was made (502).
	ReasonUpstreamError = "UpstreamError"
)

// Error is a refusal the router answers itself, as JSON. Detail keeps the key upstream's routers
// (FastAPI and Go) use, so existing SDK error handling keeps working; Reason and Header say what
// to fix.
type Error struct {
	// Status is the HTTP status code.
	Status int `json:"-"`
	// Detail is the human-readable message.
	Detail string `json:"detail"`
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// Header names the request header at fault, when there is one.
	Header string `json:"header,omitempty"`
}

func (e *Error) Error() string { return e.Detail }

// Write answers the request with e as JSON. A 401 carries the WWW-Authenticate challenge
// RFC 6750 asks for.
func (e *Error) Write(w http.ResponseWriter) {
	body, err := json.Marshal(e)
	if err != nil { // cannot happen: three strings
		body = []byte(`{"detail":"internal error"}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="sandbox-router"`)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// NotFound is a 404 refusal naming the header that led nowhere. Resolvers use it.
func NotFound(reason, header, detail string) *Error {
	return &Error{Status: http.StatusNotFound, Reason: reason, Header: header, Detail: detail}
}
