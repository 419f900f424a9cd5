package policies

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// DNSMode says how sandboxes under the default NetworkPolicy resolve names.
type DNSMode string

const (
	// DNSPublicResolvers is upstream's behaviour: the default policy blocks cluster DNS (it is
	// on a private range), and the pods are pointed at 8.8.8.8 and 1.1.1.1 instead.
	DNSPublicResolvers DNSMode = "public-resolvers"
	// DNSClusterDNS allows egress to the cluster's DNS pods on port 53 (UDP and TCP) and leaves
	// the pods' DNS settings alone. For clusters whose egress to public resolvers is closed.
	DNSClusterDNS DNSMode = "cluster-dns"
)

// PeerSelector selects the pods of one namespace.
type PeerSelector struct {
	// Namespace is matched on the kubernetes.io/metadata.name label.
	Namespace string `json:"namespace"`
	// PodLabels must all be present on the pod.
	PodLabels map[string]string `json:"podLabels"`
}

// NetworkPolicyDefaults are the knobs of the secure-default NetworkPolicy. The zero value is
// upstream's policy exactly.
type NetworkPolicyDefaults struct {
	// Routers may open connections to sandboxes. Empty means upstream's single router peer,
	// which is also where bases/router deploys: namespace agent-sandbox-system, pods labelled
	// app: sandbox-router.
	Routers []PeerSelector `json:"routers,omitempty"`
	// DNS is the DNS mode; empty means public-resolvers.
	DNS DNSMode `json:"dns,omitempty"`
	// ClusterDNS selects the DNS pods for the cluster-dns mode; empty means kube-system pods
	// labelled k8s-app: kube-dns.
	ClusterDNS *PeerSelector `json:"clusterDNS,omitempty"`
	// ExtraEgressExceptions are CIDRs added to the blocked ranges, IPv4 ones to the 0.0.0.0/0
	// rule and IPv6 ones to the ::/0 rule (for example 100.64.0.0/10, the CGNAT range some
	// clouds use for pods, which upstream leaves open).
	ExtraEgressExceptions []string `json:"extraEgressExceptions,omitempty"`
}

// Upstream's hard-coded values.
var (
	defaultRouter     = PeerSelector{Namespace: "agent-sandbox-system", PodLabels: map[string]string{"app": "sandbox-router"}}
	defaultClusterDNS = PeerSelector{Namespace: "kube-system", PodLabels: map[string]string{"k8s-app": "kube-dns"}}
	ipv4Except        = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}
	ipv6Except        = []string{"fc00::/7", "fe80::/10"}
	// PublicResolvers are the nameservers upstream gives pods under the secure default.
	PublicResolvers = []string{"8.8.8.8", "1.1.1.1"}
)

// DNSMode returns the effective DNS mode.
func (d NetworkPolicyDefaults) DNSMode() DNSMode {
	if d.DNS == "" {
		return DNSPublicResolvers
	}
	return d.DNS
}

// RouterPeers are the routers the default policy admits: Routers, or upstream's peer (where
// bases/router deploys) when none is set. Render also checks a template's own policy against
// them, to warn when it shuts the router out.
func (d NetworkPolicyDefaults) RouterPeers() []PeerSelector {
	if len(d.Routers) == 0 {
		return []PeerSelector{defaultRouter}
	}
	return d.Routers
}

// ClusterDNSPeer is where the cluster's DNS Pods are: ClusterDNS, or kube-system's k8s-app:
// kube-dns when it is not set. The cluster-dns mode opens egress to it; render also checks a
// template's own policy against it, whatever the mode.
func (d NetworkPolicyDefaults) ClusterDNSPeer() PeerSelector {
	if d.ClusterDNS == nil {
		return defaultClusterDNS
	}
	return *d.ClusterDNS
}

// Validate checks the knobs; path is where they sit in the caller's configuration.
func (d NetworkPolicyDefaults) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch d.DNS {
	case "", DNSPublicResolvers, DNSClusterDNS:
	default:
		errs = append(errs, field.NotSupported(path.Child("dns"), d.DNS, []DNSMode{DNSPublicResolvers, DNSClusterDNS}))
	}
	for i, r := range d.Routers {
		errs = append(errs, r.validate(path.Child("routers").Index(i))...)
	}
	if d.ClusterDNS != nil {
		errs = append(errs, d.ClusterDNS.validate(path.Child("clusterDNS"))...)
	}
	for i, c := range d.ExtraEgressExceptions {
		p, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("extraEgressExceptions").Index(i), c, "must be a CIDR such as 100.64.0.0/10"))
		case p.Bits() == 0:
			// An exception goes into the 0.0.0.0/0 or ::/0 rule, and the API server takes only
			// exceptions that are a strict subset of the rule's CIDR.
			errs = append(errs, field.Invalid(path.Child("extraEgressExceptions").Index(i), c, "must be narrower than the whole address space (a prefix length above 0); to block all egress, write the template's own networkPolicy"))
		}
	}
	return errs
}

// validate checks a peer as the NetworkPolicy it becomes is checked by the API server
// (ValidateLabelSelector on both selectors: label keys qualified names, values label values):
// the namespace is the value of a kubernetes.io/metadata.name selector, and a namespace name.
func (p PeerSelector) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), "a router or DNS peer is selected within one namespace"))
	} else {
		for _, msg := range validation.IsDNS1123Label(p.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), p.Namespace, "a namespace name: "+msg))
		}
	}
	if len(p.PodLabels) == 0 {
		errs = append(errs, field.Required(path.Child("podLabels"), "an empty selector would admit every pod of the namespace"))
	}
	errs = append(errs, metav1validation.ValidateLabels(p.PodLabels, path.Child("podLabels"))...)
	return errs
}

func (p PeerSelector) peer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": p.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: copyMap(p.PodLabels)},
	}
}

// DefaultSpec is the secure-default NetworkPolicy spec for the pods matched by selector. With
// zero knobs it is upstream's buildDefaultNetworkPolicySpec exactly: ingress from the router
// only, on all ports; egress to all ports of public IPv4 and IPv6 addresses, private, link-local
// and unique-local ranges excepted, in upstream's order; no DNS rule.
func (d NetworkPolicyDefaults) DefaultSpec(selector map[string]string) networkingv1.NetworkPolicySpec {
	routers := d.RouterPeers()
	ingressPeers := make([]networkingv1.NetworkPolicyPeer, len(routers))
	for i, r := range routers {
		ingressPeers[i] = r.peer()
	}
	v4, v6 := slices.Clone(ipv4Except), slices.Clone(ipv6Except)
	for _, c := range d.ExtraEgressExceptions {
		p, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			continue // Validate reports it; a render never gets here with a bad CIDR.
		case p.Addr().Is4():
			v4 = appendMissing(v4, p.Masked().String())
		default:
			v6 = appendMissing(v6, p.Masked().String())
		}
	}
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: copyMap(selector)},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: ingressPeers}},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: v4}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: v6}},
			},
		}},
	}
	if d.DNSMode() == DNSClusterDNS {
		dns := d.ClusterDNSPeer()
		spec.Egress = append(spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{dns.peer()},
			Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
				{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
			},
		})
	}
	return spec
}

func appendMissing(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// String describes a peer for messages.
func (p PeerSelector) String() string { return fmt.Sprintf("%s/%v", p.Namespace, p.PodLabels) }
