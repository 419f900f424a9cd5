package router_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sandbox-gitops/sandbox-gitops/router"
)

func TestParseHeaders(t *testing.T) {
	type refusal struct {
		Status         int
		Reason, Header string
	}
	cases := map[string]struct {
		reason  string
		headers map[string][]string
		want    router.Request
		wantErr *refusal
	}{
		"defaults": {
			reason:  "only X-Sandbox-ID: namespace default and port 8888, as upstream",
			headers: map[string][]string{"X-Sandbox-ID": {"my-sandbox"}},
			want:    router.Request{Name: "my-sandbox", Namespace: "default", Port: 8888},
		},
		"everything": {
			reason: "every header set",
			headers: map[string][]string{"X-Sandbox-ID": {"sb-1"}, "X-Sandbox-Namespace": {"team-a"}, "X-Sandbox-Port": {"65535"},
				"X-Sandbox-UID": {"0f6c0a52-8a47-4ab4-9c9e-4d2b6a1d3c2e"}, "X-Sandbox-Pod-IP": {"10.1.2.3"}},
			want: router.Request{Name: "sb-1", Namespace: "team-a", Port: 65535, UID: "0f6c0a52-8a47-4ab4-9c9e-4d2b6a1d3c2e", PodIP: netip.MustParseAddr("10.1.2.3")},
		},
		"ipv6 and v4-mapped": {
			reason:  "a v4-mapped IPv6 Pod IP is the IPv4 address",
			headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"::ffff:10.0.0.1"}, "X-Sandbox-Port": {"1"}},
			want:    router.Request{Name: "a", Namespace: "default", Port: 1, PodIP: netip.MustParseAddr("10.0.0.1")},
		},
		"case-insensitive header names": {
			reason:  "HTTP header names are case-insensitive",
			headers: map[string][]string{"x-sandbox-id": {"a"}, "x-sandbox-namespace": {"b"}},
			want:    router.Request{Name: "a", Namespace: "b", Port: 8888},
		},
		"missing id":       {reason: "X-Sandbox-ID is required", headers: map[string][]string{}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"empty id":         {reason: "empty is missing", headers: map[string][]string{"X-Sandbox-ID": {""}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"id with dot":      {reason: "a dot would address another DNS name", headers: map[string][]string{"X-Sandbox-ID": {"a.evil.com"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"id upper case":    {reason: "DNS-1123 labels are lower case", headers: map[string][]string{"X-Sandbox-ID": {"Sandbox"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"id leading dash":  {reason: "labels start with an alphanumeric", headers: map[string][]string{"X-Sandbox-ID": {"-a"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"id too long":      {reason: "labels are at most 63 characters", headers: map[string][]string{"X-Sandbox-ID": {string(make64('a'))}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"id twice":         {reason: "two values would let router and sandbox disagree", headers: map[string][]string{"X-Sandbox-ID": {"a", "b"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-ID"}},
		"namespace slash":  {reason: "traversal", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Namespace": {"../kube-system"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Namespace"}},
		"port zero":        {reason: "1-65535", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Port": {"0"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Port"}},
		"port too big":     {reason: "1-65535", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Port": {"65536"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Port"}},
		"port signed":      {reason: "digits only", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Port": {"+80"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Port"}},
		"port padded":      {reason: "leading zeros beyond five digits", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Port": {"000080"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Port"}},
		"port word":        {reason: "not a number", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Port": {"http"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Port"}},
		"uid bad chars":    {reason: "a UID is letters, digits and dashes", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-UID": {"x y"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-UID"}},
		"pod ip loopback":  {reason: "SSRF to the router itself", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"127.0.0.1"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip v6 loop":   {reason: "SSRF", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"::1"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip metadata":  {reason: "link-local: cloud metadata", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"169.254.169.254"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip multicast": {reason: "multicast", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"224.0.0.1"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip zero":      {reason: "unspecified", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"0.0.0.0"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip zone":      {reason: "zones are link-local only", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"fd00::1%eth0"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
		"pod ip host":      {reason: "a name is not an IP", headers: map[string][]string{"X-Sandbox-ID": {"a"}, "X-Sandbox-Pod-IP": {"kubernetes.default"}}, wantErr: &refusal{400, "InvalidHeader", "X-Sandbox-Pod-IP"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.headers {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			got, err := router.ParseHeaders(h)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("%s: accepted as %+v", tc.reason, got)
				}
				if diff := cmp.Diff(*tc.wantErr, refusal{err.Status, err.Reason, err.Header}); diff != "" {
					t.Errorf("%s: refusal (-want +got):\n%s", tc.reason, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}
