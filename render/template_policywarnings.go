package render

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/policies"
)

// Warning is a finding about an input object that does not stop its render: what is rendered is
// what upstream renders, but likely not what the author meant.
type Warning struct {
	// Reason names the finding in CamelCase, stable for tools (the Reason* constants).
	Reason string
	// Field is the path of the field the finding is about, as field.Path writes it.
	Field string
	// Message says what the rendered object does and what to add to fix it. It is stable: the
	// same input always gives the same words.
	Message string
}

// Reasons of the warnings TemplateNetworkPolicyWarnings gives.
const (
	// ReasonNetworkPolicyDeniesAll: the template's own policy has no rules at all.
	ReasonNetworkPolicyDeniesAll = "NetworkPolicyDeniesAll"
	// ReasonNetworkPolicyAdmitsNoRouter: no ingress rule of the template's own policy lets the
	// router's Pods in.
	ReasonNetworkPolicyAdmitsNoRouter = "NetworkPolicyAdmitsNoRouter"
	// ReasonNetworkPolicyAllowsNoDNS: the Pods use the cluster DNS and no egress rule of the
	// template's own policy lets them reach it.
	ReasonNetworkPolicyAllowsNoDNS = "NetworkPolicyAllowsNoDNS"
)

// TemplateNetworkPolicyWarnings says where a template's own NetworkPolicy surprises. Upstream
// renders a Managed template's spec.networkPolicy verbatim under policyTypes [Ingress, Egress]:
// an absent or empty direction denies everything, and unlike the secure default the policy gets
// no router rule, no DNS rule and no DNS override, whatever else the template or the render
// config says. We keep that exactly (the rendered policy does not change) and warn, naming the
// field, when the rendered policy
//   - has no rules at all: it denies everything (one warning, on spec.networkPolicy);
//   - admits none of the routers (Options' policies.networkPolicy.routers, else upstream's peer),
//     so no request through the router reaches the sandboxes (spec.networkPolicy.ingress);
//   - allows no DNS while the Pods resolve through the cluster DNS (dnsPolicy ClusterFirst or
//     unset, ClusterFirstWithHostNet): no egress rule opens UDP or TCP port 53 towards it
//     (spec.networkPolicy.egress).
//
// A warning is given only when the policy provably refuses: a peer that might select the router
// or the DNS Pods counts as letting them through. What the render cannot know is taken as a
// match: labels of the router's or DNS Pods and namespaces other than the ones the config names,
// named ports, and the namespace of a template that has none. ipBlock peers are taken to reach
// cluster Pods when they cover any private (RFC 1918), link-local or unique-local address that
// their except list does not remove: the ranges where Pods and the cluster DNS are, and that
// upstream's default policy excepts to keep sandboxes off the cluster, which is why it overrides
// DNS. Nothing is said about Unmanaged templates or templates without a policy of their own (the
// secure default admits the router and comes with its DNS).
func TemplateNetworkPolicyWarnings(t *extv1beta1.SandboxTemplate, opts Options) []Warning {
	if t.Spec.NetworkPolicy == nil {
		return nil
	}
	np := TemplateNetworkPolicy(t, opts)
	if np == nil {
		return nil
	}
	spec := &np.Spec
	path := field.NewPath("spec", "networkPolicy")
	defaults := opts.Policies.NetworkPolicy
	routers, dns := defaults.RouterPeers(), defaults.ClusterDNSPeer()
	ingressDenied := slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(spec.Ingress) == 0
	egressDenied := slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) && len(spec.Egress) == 0
	routerFix := "add an ingress rule from the router's namespace (" + peersToAdd(routers) + ")"
	dnsFix := "UDP and TCP port 53 to the cluster DNS (" + peersToAdd([]policies.PeerSelector{dns}) + ")"

	if ingressDenied && egressDenied {
		return []Warning{{Reason: ReasonNetworkPolicyDeniesAll, Field: path.String(),
			Message: "has no ingress and no egress rules, so the rendered NetworkPolicy (policyTypes Ingress and Egress, as upstream renders every custom policy) " +
				"denies all traffic to and from these sandboxes: the sandbox router cannot reach them and they reach nothing, DNS included; " +
				routerFix + " and egress rules for what they reach, such as " + dnsFix}}
	}

	var out []Warning
	if slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) && !admitsAny(spec.Ingress, routers, np.Namespace) {
		what := "is empty, and the rendered NetworkPolicy lists Ingress in its policyTypes (upstream renders Ingress and Egress for every custom policy), so it admits no ingress"
		if !ingressDenied {
			what = rulesNone(len(spec.Ingress), "admits") + " the sandbox router (" + describePeers(routers) + ")"
		}
		out = append(out, Warning{Reason: ReasonNetworkPolicyAdmitsNoRouter, Field: path.Child("ingress").String(),
			Message: what + ": the sandbox router cannot reach these sandboxes; " + routerFix})
	}
	if uses, how := usesClusterDNS(&t.Spec.PodTemplate.Spec); uses &&
		slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) && !allowsDNS(spec.Egress, dns, np.Namespace) {
		what := "is empty, and the rendered NetworkPolicy lists Egress in its policyTypes, so it allows no egress, DNS included"
		if !egressDenied {
			what = rulesNone(len(spec.Egress), "allows") + " UDP or TCP port 53 to the cluster DNS (" + describePeers([]policies.PeerSelector{dns}) + ", or a private address)"
		}
		why := "a custom policy gets no DNS rule and no DNS override"
		if defaults.DNSMode() == policies.DNSClusterDNS {
			why += " (the render config's dns: cluster-dns opens DNS in the default policy only)"
		}
		out = append(out, Warning{Reason: ReasonNetworkPolicyAllowsNoDNS, Field: path.Child("egress").String(),
			Message: fmt.Sprintf("%s, yet the Pods resolve names through the cluster DNS (%s) and %s: every name lookup in these sandboxes fails; add an egress rule for %s, or set spec.podTemplate.spec.dnsPolicy",
				what, how, why, dnsFix)})
	}
	return out
}

// rulesNone is "its rule does not <verb>" or "none of its n rules <verb>", for n > 0.
func rulesNone(n int, verb string) string {
	if n == 1 {
		return "its one rule does not " + strings.TrimSuffix(verb, "s")
	}
	return fmt.Sprintf("none of its %d rules %s", n, verb)
}

// usesClusterDNS tells whether a Pod of this spec resolves names through the cluster DNS, and
// says why. Under a custom policy the template's dnsPolicy reaches the Pod as written (upstream's
// override to public resolvers is for the secure default only). Default and None use other
// resolvers, and ClusterFirst on the host's network falls back to Default, as the kubelet does.
func usesClusterDNS(spec *corev1.PodSpec) (bool, string) {
	switch spec.DNSPolicy {
	case "":
		return !spec.HostNetwork, "dnsPolicy unset, which is ClusterFirst"
	case corev1.DNSClusterFirst:
		return !spec.HostNetwork, "dnsPolicy ClusterFirst"
	case corev1.DNSClusterFirstWithHostNet:
		return true, "dnsPolicy ClusterFirstWithHostNet"
	}
	return false, ""
}

// admitsAny tells whether some ingress rule may let one of the routers in. A rule with no from
// admits every source; ports do not matter (the router is let in on those).
func admitsAny(rules []networkingv1.NetworkPolicyIngressRule, routers []policies.PeerSelector, policyNamespace string) bool {
	for _, r := range rules {
		if len(r.From) == 0 {
			return true
		}
		for _, p := range r.From {
			for _, router := range routers {
				if maySelect(p, router, policyNamespace) {
					return true
				}
			}
		}
	}
	return false
}

// allowsDNS tells whether some egress rule may let the Pods reach the cluster DNS on port 53.
func allowsDNS(rules []networkingv1.NetworkPolicyEgressRule, dns policies.PeerSelector, policyNamespace string) bool {
	for _, r := range rules {
		if !portsMayAllowDNS(r.Ports) {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, p := range r.To {
			if maySelect(p, dns, policyNamespace) {
				return true
			}
		}
	}
	return false
}

// portsMayAllowDNS tells whether a rule's ports may include port 53 over UDP or TCP (a port with
// no protocol is TCP: TemplateNetworkPolicy has set it). A named port may be the DNS Pods' own
// (CoreDNS names its ports dns and dns-tcp), so it counts.
func portsMayAllowDNS(ports []networkingv1.NetworkPolicyPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil, p.Port.Type == intstr.String:
			return true
		case p.EndPort != nil:
			if p.Port.IntVal <= 53 && 53 <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == 53:
			return true
		}
	}
	return false
}

// maySelect tells whether a peer may select the Pods of target, false only when it provably
// does not. A peer without a namespaceSelector selects in the policy's own namespace, unknown
// when the template has none.
func maySelect(p networkingv1.NetworkPolicyPeer, target policies.PeerSelector, policyNamespace string) bool {
	if p.IPBlock != nil {
		return mayHoldClusterAddresses(p.IPBlock)
	}
	if p.NamespaceSelector == nil {
		if policyNamespace != "" && policyNamespace != target.Namespace {
			return false
		}
	} else if !mayMatch(p.NamespaceSelector, map[string]string{namespaceNameLabel: target.Namespace}) {
		return false
	}
	return p.PodSelector == nil || mayMatch(p.PodSelector, target.PodLabels)
}

// namespaceNameLabel is the label the API server gives every namespace, its name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// mayMatch tells whether a selector may match an object known to carry the labels known: false
// only when a requirement on one of those keys fails. The object may carry other labels, so a
// requirement on any other key may hold.
func mayMatch(sel *metav1.LabelSelector, known map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return true // ValidateNetworkPolicyRules reports it; a render never gets here with one
	}
	reqs, _ := s.Requirements()
	set := labels.Set(known)
	for _, r := range reqs {
		if _, ok := known[r.Key()]; ok && !r.Matches(set) {
			return false
		}
	}
	return true
}

// clusterRanges are the addresses taken for cluster Pods and the cluster DNS: RFC 1918,
// link-local (node-local DNS caches listen on 169.254.20.10) and IPv6 unique-local.
var clusterRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fc00::/7"),
}

// mayHoldClusterAddresses tells whether an ipBlock covers some cluster address (clusterRanges)
// that none of its exceptions removes. Exceptions that only together cover a range are not
// added up: the block then counts as reaching it.
func mayHoldClusterAddresses(b *networkingv1.IPBlock) bool {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return true // ValidateNetworkPolicyRules reports it
	}
	cidr = cidr.Masked()
	for _, r := range clusterRanges {
		if !cidr.Overlaps(r) {
			continue
		}
		overlap := r
		if cidr.Bits() > r.Bits() {
			overlap = cidr
		}
		if !excepted(overlap, b.Except) {
			return true
		}
	}
	return false
}

func excepted(p netip.Prefix, except []string) bool {
	for _, e := range except {
		ep, err := netip.ParsePrefix(e)
		if err == nil && ep.Bits() <= p.Bits() && ep.Masked().Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// describePeers names peers for a message: "pods app=sandbox-router in namespace agent-sandbox-system".
func describePeers(peers []policies.PeerSelector) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = "pods " + labelList(p.PodLabels) + " in namespace " + p.Namespace
	}
	return strings.Join(parts, ", or ")
}

// peersToAdd says how to write peers in a rule, as the default policy writes them.
func peersToAdd(peers []policies.PeerSelector) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = "a peer with namespaceSelector " + namespaceNameLabel + "=" + p.Namespace + " and podSelector " + labelList(p.PodLabels)
	}
	return strings.Join(parts, ", or ")
}

// labelList writes labels as key=value, sorted by key.
func labelList(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}
