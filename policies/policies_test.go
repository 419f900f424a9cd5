package policies

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestDefaultSpecKnobs(t *testing.T) {
	sel := map[string]string{"k": "v"}
	cases := map[string]struct {
		reason   string
		knobs    NetworkPolicyDefaults
		wantV4   []string
		wantV6   []string
		wantDNS  bool
		wantPeer string
	}{
		"zero value is upstream's": {
			reason:   "no knob set must give upstream's policy",
			wantV4:   []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"},
			wantV6:   []string{"fc00::/7", "fe80::/10"},
			wantPeer: "agent-sandbox-system",
		},
		"extra exceptions by family, deduplicated, masked": {
			reason: "IPv4 CIDRs join the 0.0.0.0/0 rule, IPv6 ones the ::/0 rule, never twice",
			knobs:  NetworkPolicyDefaults{ExtraEgressExceptions: []string{"100.64.0.0/10", "10.0.0.0/8", "fd00:ec2::1/32", "198.18.0.1/15"}},
			wantV4: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "198.18.0.0/15"},
			wantV6: []string{"fc00::/7", "fe80::/10", "fd00:ec2::/32"}, wantPeer: "agent-sandbox-system",
		},
		"cluster dns": {
			reason:  "the cluster-dns mode adds one egress rule to the DNS pods",
			knobs:   NetworkPolicyDefaults{DNS: DNSClusterDNS, Routers: []PeerSelector{{Namespace: "default", PodLabels: map[string]string{"app.kubernetes.io/name": "sandbox-router"}}}},
			wantV4:  []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"},
			wantV6:  []string{"fc00::/7", "fe80::/10"},
			wantDNS: true, wantPeer: "default",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := tc.knobs.DefaultSpec(sel)
			to := spec.Egress[0].To
			if diff := cmp.Diff(tc.wantV4, to[0].IPBlock.Except); diff != "" {
				t.Errorf("%s: IPv4 exceptions (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantV6, to[1].IPBlock.Except); diff != "" {
				t.Errorf("%s: IPv6 exceptions (-want +got):\n%s", tc.reason, diff)
			}
			if got := len(spec.Egress) == 2; got != tc.wantDNS {
				t.Errorf("%s: DNS rule present = %v", tc.reason, got)
			}
			if got := spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != tc.wantPeer {
				t.Errorf("%s: router namespace = %q, want %q", tc.reason, got, tc.wantPeer)
			}
		})
	}
}

func TestSecurePodDefaults(t *testing.T) {
	cases := map[string]struct {
		reason      string
		knobs       NetworkPolicyDefaults
		spec        corev1.PodSpec
		secure      bool
		wantPolicy  corev1.DNSPolicy
		wantMount   bool
		wantServers []string
	}{
		"secure default": {"the policy blocks cluster DNS, so public resolvers", NetworkPolicyDefaults{}, corev1.PodSpec{}, true, corev1.DNSNone, false, PublicResolvers},
		"custom policy":  {"no override when the template brings its own rules", NetworkPolicyDefaults{}, corev1.PodSpec{}, false, "", false, nil},
		"own dnsPolicy":  {"a template's dnsPolicy wins", NetworkPolicyDefaults{}, corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}, true, corev1.DNSClusterFirst, false, nil},
		"cluster-dns":    {"the cluster-dns mode leaves DNS alone", NetworkPolicyDefaults{DNS: DNSClusterDNS}, corev1.PodSpec{}, true, "", false, nil},
		"automount kept": {"an explicit automount is kept", NetworkPolicyDefaults{}, corev1.PodSpec{AutomountServiceAccountToken: ptr.To(true)}, true, corev1.DNSNone, true, PublicResolvers},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.spec
			tc.knobs.SecurePodDefaults(&s, tc.secure)
			var servers []string
			if s.DNSConfig != nil {
				servers = s.DNSConfig.Nameservers
			}
			got := []any{s.DNSPolicy, *s.AutomountServiceAccountToken, servers}
			want := []any{tc.wantPolicy, tc.wantMount, tc.wantServers}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPacks(t *testing.T) {
	root := field.NewPath("spec")
	restricted := Packs{Restricted: true}
	clean := corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}
	if errs := restricted.ApplyPod(&clean, root); len(errs) != 0 {
		t.Fatalf("a plain pod violates restricted: %v", errs)
	}
	c := clean.Containers[0].SecurityContext
	if !*clean.SecurityContext.RunAsNonRoot || clean.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		*c.AllowPrivilegeEscalation || !cmp.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("restricted did not set its defaults: pod %+v container %+v", clean.SecurityContext, c)
	}
	// Applying twice changes nothing more (a render of a render).
	again := *clean.DeepCopy()
	restricted.ApplyPod(&again, root)
	if diff := cmp.Diff(clean, again); diff != "" {
		t.Errorf("restricted is not idempotent (-once +twice):\n%s", diff)
	}

	bad := corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "a", SecurityContext: &corev1.SecurityContext{
		Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}
	var fields []string
	for _, e := range restricted.ApplyPod(&bad, root) {
		fields = append(fields, e.Field)
	}
	want := []string{"spec.hostNetwork", "spec.containers[0].securityContext.privileged", "spec.containers[0].securityContext.capabilities.add[0]"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}

	rc := Packs{RuntimeClass: &RuntimeClassPack{Allowed: []string{"gvisor"}, Default: "gvisor"}}
	p := corev1.PodSpec{}
	if errs := rc.ApplyPod(&p, root); len(errs) != 0 || *p.RuntimeClassName != "gvisor" {
		t.Errorf("runtime-class default not set: %v %v", errs, p.RuntimeClassName)
	}
	p.RuntimeClassName = ptr.To("runc")
	if errs := rc.ApplyPod(&p, root); len(errs) != 1 || !strings.Contains(errs[0].Error(), `Unsupported value: "runc"`) {
		t.Errorf("runc accepted: %v", errs)
	}
}

// TestRestrictedRunAsUser: runAsNonRoot alone cannot start an image that runs as root, so the
// restricted pack sets a non-root runAsUser where the pod and some container name none, or,
// with restrictedDefaultUser 0, rejects the pod saying why.
func TestRestrictedRunAsUser(t *testing.T) {
	root := field.NewPath("spec")
	user := func(u int64) *corev1.SecurityContext { return &corev1.SecurityContext{RunAsUser: ptr.To(u)} }
	cases := map[string]struct {
		reason   string
		packs    Packs
		spec     corev1.PodSpec
		wantUser *int64
		wantErr  string
	}{
		"default": {reason: "no user anywhere: the documented default",
			packs: Packs{Restricted: true}, spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, wantUser: ptr.To(DefaultNonRootUser)},
		"option": {reason: "the pack's option wins over the default",
			packs: Packs{Restricted: true, RestrictedDefaultUser: ptr.To[int64](1001)}, spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, wantUser: ptr.To[int64](1001)},
		"pod user kept": {reason: "a pod-level user is the user",
			packs: Packs{Restricted: true}, spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](7)}, Containers: []corev1.Container{{Name: "a"}}}, wantUser: ptr.To[int64](7)},
		"every container": {reason: "every container names a user: nothing to set",
			packs: Packs{Restricted: true}, spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", SecurityContext: user(5)}}, Containers: []corev1.Container{{Name: "a", SecurityContext: user(6)}}}},
		"one container lacks": {reason: "an init container without a user needs the default",
			packs: Packs{Restricted: true}, spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i"}}, Containers: []corev1.Container{{Name: "a", SecurityContext: user(6)}}}, wantUser: ptr.To(DefaultNonRootUser)},
		"no default": {reason: "restrictedDefaultUser 0: rejected with the reason",
			packs: Packs{Restricted: true, RestrictedDefaultUser: ptr.To[int64](0)}, spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}},
			wantErr: "spec.securityContext.runAsUser: Required value: restricted policy pack"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := tc.packs.ApplyPod(&tc.spec, root)
			if tc.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
					t.Fatalf("%s: errors %v, want one containing %q", tc.reason, errs, tc.wantErr)
				}
				return
			}
			if len(errs) != 0 {
				t.Fatalf("%s: %v", tc.reason, errs)
			}
			if diff := cmp.Diff(tc.wantUser, tc.spec.SecurityContext.RunAsUser); diff != "" {
				t.Errorf("%s: pod runAsUser (-want +got):\n%s", tc.reason, diff)
			}
			if !*tc.spec.SecurityContext.RunAsNonRoot {
				t.Errorf("%s: runAsNonRoot not set", tc.reason)
			}
		})
	}
	if errs := (Config{Packs: Packs{RestrictedDefaultUser: ptr.To[int64](-1)}}).Validate(root); len(errs) != 1 {
		t.Errorf("a negative restrictedDefaultUser is accepted: %v", errs)
	}
}

// TestRuntimeClassNames: the runtime-class pack allows RuntimeClass names only, as the API server
// validates them (DNS-1123 subdomains); "Bad Name" was taken and allowed nothing a Pod can name.
func TestRuntimeClassNames(t *testing.T) {
	cases := map[string]struct {
		reason  string
		allowed []string
		want    []string // the fields of the errors
	}{
		"Names":     {reason: "RuntimeClass names", allowed: []string{"gvisor", "kata-qemu", "runsc.v2"}},
		"Space":     {reason: "a space", allowed: []string{"gvisor", "Bad Name"}, want: []string{"spec.packs.runtimeClass.allowed[1]"}},
		"Uppercase": {reason: "upper case", allowed: []string{"Gvisor"}, want: []string{"spec.packs.runtimeClass.allowed[0]"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := Config{Packs: Packs{RuntimeClass: &RuntimeClassPack{Allowed: tc.allowed}}}.Validate(field.NewPath("spec"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: error fields (-want +got):\n%s\n%v", tc.reason, diff, errs)
			}
		})
	}
}
