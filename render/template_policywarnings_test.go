package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/policies"
)

func TestTemplateNetworkPolicyWarnings(t *testing.T) {
	// Peers and rules as a template would write them.
	peer := func(ns string, pods map[string]string) networkingv1.NetworkPolicyPeer {
		p := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: pods}}
		if ns != "" {
			p.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		}
		return p
	}
	from := func(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
		return networkingv1.NetworkPolicyIngressRule{From: peers}
	}
	port := func(proto corev1.Protocol, p intstr.IntOrString) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: &p}
	}
	to := func(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
		return networkingv1.NetworkPolicyEgressRule{To: peers, Ports: ports}
	}
	ipBlock := func(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
	}
	dns53 := []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, intstr.FromInt32(53)), port(corev1.ProtocolTCP, intstr.FromInt32(53))}
	https := []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromInt32(443))}
	router := from(peer("agent-sandbox-system", map[string]string{"app": "sandbox-router"}))
	kubeDNS := to(dns53, peer("kube-system", map[string]string{"k8s-app": "kube-dns"}))
	publicOnly := to(nil, ipBlock("0.0.0.0/0", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"), ipBlock("::/0", "fc00::/7", "fe80::/10"))

	type want struct{ Reason, Field string }
	noRouter := want{ReasonNetworkPolicyAdmitsNoRouter, "spec.networkPolicy.ingress"}
	noDNS := want{ReasonNetworkPolicyAllowsNoDNS, "spec.networkPolicy.egress"}
	denyAll := want{ReasonNetworkPolicyDeniesAll, "spec.networkPolicy"}

	cases := map[string]struct {
		reason string
		// policy is the template's spec.networkPolicy.
		policy *extv1beta1.NetworkPolicySpec
		mgmt   extv1beta1.NetworkPolicyManagement
		// pod, namespace change the template's pod spec and namespace (default: "default").
		pod       func(*corev1.PodSpec)
		namespace *string
		opts      Options
		want      []want
		// wantIn are words the messages must hold, in order of the warnings.
		wantIn []string
	}{
		"no policy of its own": {
			reason: "the secure default admits the router and comes with its DNS",
		},
		"no policy, Unmanaged": {
			reason: "nothing is rendered", mgmt: extv1beta1.NetworkPolicyManagementUnmanaged,
		},
		"Unmanaged deny-all": {
			reason: "an Unmanaged template's policy is not rendered, so it refuses nothing",
			mgmt:   extv1beta1.NetworkPolicyManagementUnmanaged, policy: &extv1beta1.NetworkPolicySpec{},
		},
		"{} denies all": {
			reason: "no rules in either direction under both policy types: one warning, on the policy",
			policy: &extv1beta1.NetworkPolicySpec{}, want: []want{denyAll},
			wantIn: []string{"denies all traffic to and from these sandboxes"},
		},
		"{} denies all, Managed spelt out": {
			reason: "Managed is the default", mgmt: extv1beta1.NetworkPolicyManagementManaged,
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{}, Egress: []networkingv1.NetworkPolicyEgressRule{}},
			want:   []want{denyAll},
		},
		"{} denies all, whatever the DNS": {
			reason: "deny-all is said even when the Pods do not use the cluster DNS",
			policy: &extv1beta1.NetworkPolicySpec{}, pod: func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSDefault },
			want: []want{denyAll},
		},
		"egress-only": {
			reason: "the rendered policy still lists Ingress (upstream renders both types), so an egress-only policy refuses the router; its egress to 443 has no DNS",
			policy: &extv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{to(https)}},
			want:   []want{noRouter, noDNS},
			wantIn: []string{"is empty, and the rendered NetworkPolicy lists Ingress in its policyTypes", "its one rule does not allow UDP or TCP port 53"},
		},
		"egress-only, egress open": {
			reason: "egress [{}] allows everything, DNS included; the router is still refused",
			policy: &extv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
			want:   []want{noRouter},
		},
		"ingress-only": {
			reason: "no egress at all while the Pods use the cluster DNS",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}},
			want:   []want{noDNS}, wantIn: []string{"allows no egress, DNS included"},
		},
		"router and DNS admitted": {
			reason: "a custom policy with the router's peer and DNS to kube-dns surprises no one",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{to(https), kubeDNS}},
		},
		"ingress from a gateway only": {
			reason: "a peer in the template's own namespace never selects the router's Pods",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(peer("", map[string]string{"app": "gateway"}))},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
			want: []want{noRouter}, wantIn: []string{"its one rule does not admit the sandbox router (pods app=sandbox-router in namespace agent-sandbox-system)"},
		},
		"ingress from another namespace's router label": {
			reason: "the namespace name label of another namespace provably excludes the router's",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(peer("ingress-nginx", map[string]string{"app": "sandbox-router"})), from(peer("agent-sandbox-system", map[string]string{"app": "other"}))},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
			want: []want{noRouter}, wantIn: []string{"none of its 2 rules admits"},
		},
		"ingress from every namespace": {
			reason: "an empty namespaceSelector and no podSelector select the router too",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
		},
		"ingress on a port from anywhere": {
			reason: "a rule with ports and no from admits every source on them",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromInt32(8888))}}},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
		},
		"ingress by labels the render cannot know": {
			reason: "a namespace label other than its name may be on the router's namespace: not provably refused",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "infra"}}})},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
		},
		"ingress from a public ipBlock": {
			reason: "a block with no private address never holds the router's Pod",
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(ipBlock("203.0.113.0/24"))},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
			want: []want{noRouter},
		},
		"template without a namespace": {
			reason:    "a peer without namespaceSelector selects where the template is applied, which the render cannot know",
			namespace: ptr.To(""),
			policy: &extv1beta1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{from(peer("", map[string]string{"app": "sandbox-router"}))},
				Egress:  []networkingv1.NetworkPolicyEgressRule{kubeDNS},
			},
		},
		"configured routers": {
			reason: "the routers are the config's: a rule for the default peer does not admit them, and the fix names them",
			opts:   Options{Policies: policies.Config{NetworkPolicy: policies.NetworkPolicyDefaults{Routers: []policies.PeerSelector{{Namespace: "sandbox-router", PodLabels: map[string]string{"app": "sandbox-router"}}}}}},
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{kubeDNS}},
			want:   []want{noRouter}, wantIn: []string{"namespaceSelector kubernetes.io/metadata.name=sandbox-router and podSelector app=sandbox-router"},
		},
		"upstream's default egress copied": {
			reason: "public addresses only: the cluster DNS is on a private one",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{publicOnly}},
			want:   []want{noDNS},
		},
		"cluster-dns mode does not apply": {
			reason: "the config's DNS rule is the default policy's; the message says so",
			opts:   Options{Policies: policies.Config{NetworkPolicy: policies.NetworkPolicyDefaults{DNS: policies.DNSClusterDNS}}},
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{to(https)}},
			want:   []want{noDNS}, wantIn: []string{"dns: cluster-dns opens DNS in the default policy only"},
		},
		"DNS to a private block": {
			reason: "port 53 to 10.0.0.0/8 may be the cluster DNS",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{to(dns53, ipBlock("10.0.0.0/8"))}},
		},
		"DNS by a port range": {
			reason: "a range that holds 53 allows it",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{
				to([]networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(1)), EndPort: ptr.To[int32](1024)}}),
			}},
		},
		"DNS by a named port": {
			reason: "a named port may be CoreDNS's dns",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{
				to([]networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, intstr.FromString("dns"))}, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}),
			}},
		},
		"port 53 over SCTP only": {
			reason: "DNS is UDP or TCP",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{
				to([]networkingv1.NetworkPolicyPort{port(corev1.ProtocolSCTP, intstr.FromInt32(53))}),
			}},
			want: []want{noDNS},
		},
		"port 53 to the wrong pods": {
			reason: "kube-system pods that are not the DNS",
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{
				to(dns53, peer("kube-system", map[string]string{"k8s-app": "metrics-server"})),
			}},
			want: []want{noDNS},
		},
		"dnsPolicy None": {
			reason: "the Pods use the nameservers of their dnsConfig, not the cluster DNS",
			pod: func(s *corev1.PodSpec) {
				s.DNSPolicy = corev1.DNSNone
				s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8"}}
			},
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}, Egress: []networkingv1.NetworkPolicyEgressRule{to(https)}},
		},
		"dnsPolicy Default": {
			reason: "the Pods use the node's resolvers",
			pod:    func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSDefault },
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}},
		},
		"dnsPolicy ClusterFirst on the host network": {
			reason: "the kubelet falls back to Default",
			pod:    func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSClusterFirst; s.HostNetwork = true },
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}},
		},
		"dnsPolicy ClusterFirstWithHostNet": {
			reason: "the Pods use the cluster DNS",
			pod:    func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSClusterFirstWithHostNet },
			policy: &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{router}},
			want:   []want{noDNS}, wantIn: []string{"(dnsPolicy ClusterFirstWithHostNet)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tpl := testTemplate(tc.mgmt, tc.policy)
			tpl.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
			if tc.pod != nil {
				tc.pod(&tpl.Spec.PodTemplate.Spec)
			}
			if tc.namespace != nil {
				tpl.Namespace = *tc.namespace
			}
			before := TemplateNetworkPolicy(tpl, tc.opts)
			warnings := TemplateNetworkPolicyWarnings(tpl, tc.opts)
			var got []want
			for _, w := range warnings {
				got = append(got, want{w.Reason, w.Field})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: warnings (-want +got):\n%s\n%v", tc.reason, diff, warnings)
			}
			for i, words := range tc.wantIn {
				if i < len(warnings) && !strings.Contains(warnings[i].Message, words) {
					t.Errorf("%s: warning %d does not say %q: %s", tc.reason, i, words, warnings[i].Message)
				}
			}
			for _, w := range warnings {
				if !strings.Contains(w.Message, "; add ") {
					t.Errorf("%s: %s says nothing about what to add: %s", tc.reason, w.Field, w.Message)
				}
			}
			if diff := cmp.Diff(before, TemplateNetworkPolicy(tpl, tc.opts)); diff != "" {
				t.Errorf("%s: the warnings changed the rendered policy (-before +after):\n%s", tc.reason, diff)
			}
			if again := TemplateNetworkPolicyWarnings(tpl, tc.opts); !cmp.Equal(warnings, again) {
				t.Errorf("%s: a second call gave other warnings:\n%v\n%v", tc.reason, warnings, again)
			}
		})
	}
}
