package renderconfig

import (
	"strings"
	"testing"
)

// TestConfigFieldErrors: functionConfig errors name the field, the value written and the type
// expected.
func TestConfigFieldErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   string
		want   string
	}{
		"BoolAsString": {
			reason: `restricted: "yes" said "functionConfig: unrecognized type: bool" (no field, type backwards)`,
			spec:   `policies: {packs: {restricted: "yes"}}`,
			want:   `spec.policies.packs.restricted: Invalid value: "yes": must be a boolean (true or false)`,
		},
		"ListAsString": {
			reason: "a string where a list is expected",
			spec:   `allowedLabelDomains: example.com`,
			want:   `spec.allowedLabelDomains: Invalid value: "example.com": must be a list`,
		},
		"BadNow": {
			reason: `now: x said parsing time "x" as "2006-01-02T15:04:05Z07:00", without the field`,
			spec:   `now: x`,
			want:   `spec.now: Invalid value: "x": must be an RFC 3339 time such as 2026-06-01T12:00:00Z`,
		},
		"BadClusterDomain": {
			reason: `clusterDomain: "bad domain!" was accepted`,
			spec:   `clusterDomain: "bad domain!"`,
			want:   `spec.clusterDomain: Invalid value: "bad domain!"`,
		},
		"BadLabelDomain": {
			reason: "a label domain no label key can have was accepted, and allowed nothing",
			spec:   `allowedLabelDomains: [sandbox.users.io, "under_score"]`,
			want:   `spec.allowedLabelDomains[1]: Invalid value: "under_score"`,
		},
		"UnknownField": {
			reason: "a misspelt knob",
			spec:   `clusterDomian: example.com`,
			want:   `spec.clusterDomian`,
		},
		"RouterNamespaceInvalid": {
			reason: "a router namespace no namespace can have became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: "Bad_NS", podLabels: {app: r}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].namespace: Invalid value: "Bad_NS": a namespace name:`,
		},
		"RouterPodLabelKeyInvalid": {
			reason: "a router pod label key that is not a qualified name became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: r, podLabels: {"bad key": r}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].podLabels: Invalid value: "bad key"`,
		},
		"RouterPodLabelValueInvalid": {
			reason: "a router pod label value that is not a label value became a NetworkPolicy the API server refuses",
			spec:   `policies: {networkPolicy: {routers: [{namespace: r, podLabels: {app: "a b"}}]}}`,
			want:   `spec.policies.networkPolicy.routers[0].podLabels: Invalid value: "a b"`,
		},
		"ClusterDNSNamespaceInvalid": {
			reason: "the DNS peer becomes a NetworkPolicy peer as the routers do",
			spec:   `policies: {networkPolicy: {dns: cluster-dns, clusterDNS: {namespace: "a.b", podLabels: {k8s-app: kube-dns}}}}`,
			want:   `spec.policies.networkPolicy.clusterDNS.namespace: Invalid value: "a.b"`,
		},
		"EgressExceptionWholeSpace": {
			reason: "::/0 as an exception rendered a NetworkPolicy the API server refuses (not a strict subset of ::/0)",
			spec:   `policies: {networkPolicy: {extraEgressExceptions: ["::/0"]}}`,
			want:   `spec.policies.networkPolicy.extraEgressExceptions[0]: Invalid value: "::/0": must be narrower than the whole address space`,
		},
		"NegativeLimit": {
			reason: "a pool limit below 0",
			spec:   `maxPoolReplicas: -1`,
			want:   `spec.maxPoolReplicas: Invalid value: -1`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte("apiVersion: " + APIVersion + "\nkind: " + Kind + "\nspec:\n  " + tc.spec + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nParse error = %v\nwant one containing %q", tc.reason, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "%!") || strings.Contains(err.Error(), "interface {}")) {
				t.Errorf("%s\nGo internals in the message: %v", tc.reason, err)
			}
		})
	}
}
