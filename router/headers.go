package router

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
)

// The routing headers of upstream's contract. SDKs set them; the router reads them and forwards
// them unchanged.
const (
	HeaderID        = "X-Sandbox-ID"
	HeaderNamespace = "X-Sandbox-Namespace"
	HeaderPort      = "X-Sandbox-Port"
	HeaderUID       = "X-Sandbox-UID"
	HeaderPodIP     = "X-Sandbox-Pod-IP"
	// HeaderAuthorization carries the caller's bearer token for --authz=kubernetes; it is never
	// forwarded to a sandbox.
	HeaderAuthorization = "Authorization"
)

// Defaults of upstream's routers.
const (
	DefaultNamespace = "default"
	DefaultPort      = 8888
	// maxUIDLength bounds X-Sandbox-UID; Kubernetes UIDs are 36-character UUIDs.
	maxUIDLength = 128
)

// Request is what a caller asked for, from the routing headers, validated but not yet resolved.
type Request struct {
	// Name is the Sandbox name (X-Sandbox-ID), a DNS-1123 label.
	Name string
	// Namespace is the Sandbox namespace (X-Sandbox-Namespace, default "default").
	Namespace string
	// Port is the Pod port to reach (X-Sandbox-Port, default 8888).
	Port int
	// UID, when set, pins one incarnation of the Sandbox (X-Sandbox-UID).
	UID string
	// PodIP, when set, is the caller's claim of the Pod's IP (X-Sandbox-Pod-IP); it is honoured
	// only when it is an IP of that Sandbox's Pod.
	PodIP netip.Addr
}

// ParseHeaders reads and validates the routing headers. It accepts what upstream's routers accept
// (DNS-1123 labels for name and namespace, ports 1-65535, Pod IPs that are not loopback,
// link-local, multicast or unspecified) and also refuses a routing header sent more than once,
// which upstream silently resolves to the first value. The error names the header.
func ParseHeaders(h http.Header) (Request, *Error) {
	var req Request
	var err *Error
	if req.Name, err = single(h, HeaderID); err != nil {
		return Request{}, err
	}
	if req.Name == "" {
		return Request{}, invalid(HeaderID, "Required value: the name of the Sandbox to reach")
	}
	if msg := dns1123Label(req.Name); msg != "" {
		return Request{}, invalid(HeaderID, fmt.Sprintf("Invalid value: %q: %s", req.Name, msg))
	}

	if req.Namespace, err = single(h, HeaderNamespace); err != nil {
		return Request{}, err
	}
	if req.Namespace == "" {
		req.Namespace = DefaultNamespace
	} else if msg := dns1123Label(req.Namespace); msg != "" {
		return Request{}, invalid(HeaderNamespace, fmt.Sprintf("Invalid value: %q: %s", req.Namespace, msg))
	}

	port, err := single(h, HeaderPort)
	if err != nil {
		return Request{}, err
	}
	req.Port = DefaultPort
	if port != "" {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 || len(port) > 5 || !digits(port) {
			return Request{}, invalid(HeaderPort, fmt.Sprintf("Invalid value: %q: must be an integer between 1 and 65535", port))
		}
		req.Port = n
	}

	if req.UID, err = single(h, HeaderUID); err != nil {
		return Request{}, err
	}
	if msg := uid(req.UID); msg != "" {
		return Request{}, invalid(HeaderUID, fmt.Sprintf("Invalid value: %q: %s", req.UID, msg))
	}

	ip, err := single(h, HeaderPodIP)
	if err != nil {
		return Request{}, err
	}
	if ip != "" {
		addr, perr := netip.ParseAddr(ip)
		// A zone (fe80::1%eth0) is never a Pod IP, and only link-local addresses carry one.
		if perr != nil || addr.Zone() != "" {
			return Request{}, invalid(HeaderPodIP, fmt.Sprintf("Invalid value: %q: must be an IPv4 or IPv6 address", ip))
		}
		addr = addr.Unmap()
		if addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
			addr.IsMulticast() || addr.IsUnspecified() {
			return Request{}, invalid(HeaderPodIP, fmt.Sprintf("Invalid value: %q: loopback, link-local, multicast and unspecified addresses are never Pod IPs", ip))
		}
		req.PodIP = addr
	}
	return req, nil
}

func invalid(header, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Reason: ReasonInvalidHeader, Header: header, Detail: header + ": " + msg}
}

// single returns the header's value, refusing more than one: two X-Sandbox-ID values would let
// the router and the sandbox (which sees both) disagree about who was addressed.
func single(h http.Header, name string) (string, *Error) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	default:
		return "", invalid(name, fmt.Sprintf("Duplicate value: sent %d times, must be sent at most once", len(vs)))
	}
}

// dns1123Label checks a DNS-1123 label (RFC 1123: lower-case alphanumerics and '-', starting and
// ending with an alphanumeric, at most 63 characters), as Kubernetes does for namespace and Pod
// names and upstream's routers do for these headers; "" means valid.
func dns1123Label(s string) string {
	if len(s) > 63 {
		return "must be no more than 63 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
		}
	}
	return ""
}

// uid bounds X-Sandbox-UID: a Kubernetes UID is a UUID; anything long or with characters outside
// a UUID's alphabet cannot name a Sandbox and is refused before it reaches a log line.
func uid(s string) string {
	if len(s) > maxUIDLength {
		return fmt.Sprintf("must be no more than %d characters", maxUIDLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return "must be a Kubernetes UID (letters, digits and '-')"
		}
	}
	return ""
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
