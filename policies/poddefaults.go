package policies

import (
	corev1 "k8s.io/api/core/v1"
)

// SecurePodDefaults is upstream's ApplySandboxSecureDefaults, applied to the pod spec of every
// Sandbox made from a template (claim and warm pool paths; never to a hand-written Sandbox):
//   - automountServiceAccountToken false unless the template says otherwise;
//   - under the secure-default NetworkPolicy (policy managed, networkPolicy unset) and a template
//     without a dnsPolicy, and in the public-resolvers DNS mode, dnsPolicy None with dnsConfig
//     replaced by the public resolvers (the default policy blocks cluster DNS).
//
// In the cluster-dns mode the default policy allows the cluster's DNS, so the pod's DNS is left
// alone.
func (d NetworkPolicyDefaults) SecurePodDefaults(spec *corev1.PodSpec, secureDefaultPolicy bool) {
	if spec.AutomountServiceAccountToken == nil {
		f := false
		spec.AutomountServiceAccountToken = &f
	}
	d.PublicDNS(spec, secureDefaultPolicy)
}

// PublicDNS points a pod at public resolvers when it runs under a secure-default policy in the
// public-resolvers mode and has no dnsPolicy of its own. dnsConfig is replaced wholesale, as
// upstream does.
func (d NetworkPolicyDefaults) PublicDNS(spec *corev1.PodSpec, secureDefaultPolicy bool) {
	if !secureDefaultPolicy || d.DNSMode() != DNSPublicResolvers || spec.DNSPolicy != "" {
		return
	}
	spec.DNSPolicy = corev1.DNSNone
	spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: append([]string(nil), PublicResolvers...)}
}
