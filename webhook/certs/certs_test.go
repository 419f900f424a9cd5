package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	t0     = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	hosts  = []string{"sandbox-gitops-webhook-service.sandbox-gitops-system.svc", "127.0.0.1"}
	policy = Policy{CAValidity: 30 * time.Hour, CertValidity: 9 * time.Hour}
)

// plan runs Plan and fails the test on an error.
func plan(t *testing.T, now time.Time, data map[string][]byte, h []string) (map[string][]byte, string) {
	t.Helper()
	next, reason, err := Plan(now, data, h, policy)
	if err != nil {
		t.Fatal(err)
	}
	return next, reason
}

func TestPlan(t *testing.T) {
	fresh := func(t *testing.T) map[string][]byte { d, _ := plan(t, t0, nil, hosts); return d }
	cases := map[string]struct {
		reason string
		data   func(t *testing.T) map[string][]byte
		now    time.Time
		hosts  []string
		// wantReason is the reason Plan gives ("" when nothing changes).
		wantReason string
		// sameCA and sameCert say whether the CA (first in the bundle) and the serving certificate
		// stay; bundleLen is the number of CAs published.
		sameCA, sameCert bool
		bundleLen        int
	}{
		"empty": {
			reason: "a new Secret gets a CA and a serving certificate", data: func(*testing.T) map[string][]byte { return nil },
			now: t0, hosts: hosts, wantReason: "no usable CA; no usable serving certificate", bundleLen: 1,
		},
		"steady": {
			reason: "its own output is kept as it is", data: fresh,
			now: t0.Add(time.Hour), hosts: hosts, sameCA: true, sameCert: true, bundleLen: 1,
		},
		"serving certificate due": {
			reason: "with less than a third of its life left the serving certificate is renewed by the same CA", data: fresh,
			now: t0.Add(7 * time.Hour), hosts: hosts, wantReason: "the serving certificate expires at 2026-06-01T21:00:00Z", sameCA: true, bundleLen: 1,
		},
		"serving certificate expired": {
			reason: "a controller that was down for a while replaces an expired certificate", data: fresh,
			now: t0.Add(10 * time.Hour), hosts: hosts, wantReason: "the serving certificate is not valid now", sameCA: true, bundleLen: 1,
		},
		"CA due": {
			reason: "a new CA is published first in the bundle, the old one stays until it expires", data: fresh,
			now: t0.Add(21 * time.Hour), hosts: hosts, wantReason: "the CA expires at 2026-06-02T18:00:00Z; the serving certificate is not valid now", bundleLen: 2,
		},
		"CA due, serving certificate valid": {
			reason: "the serving certificate of the old CA stays while it is valid: the new CA is published before it signs anything served",
			data: func(t *testing.T) map[string][]byte {
				d, _ := plan(t, t0.Add(19*time.Hour), fresh(t), hosts) // renewed: valid until t0+28h
				return d
			},
			now: t0.Add(21 * time.Hour), hosts: hosts, wantReason: "the CA expires at 2026-06-02T18:00:00Z", sameCert: true, bundleLen: 2,
		},
		"old CA expired": {
			reason: "an expired CA leaves the bundle", data: func(t *testing.T) map[string][]byte {
				d, _ := plan(t, t0.Add(21*time.Hour), fresh(t), hosts) // CA renewed: two in the bundle
				d, _ = plan(t, t0.Add(29*time.Hour), d, hosts)         // serving certificate renewed
				return d
			},
			now: t0.Add(31 * time.Hour), hosts: hosts, wantReason: "an earlier CA expired", sameCA: true, sameCert: true, bundleLen: 1,
		},
		"new host": {
			reason: "a serving certificate that does not name a host is replaced", data: fresh,
			now: t0.Add(time.Hour), hosts: append([]string{"localhost"}, hosts...), wantReason: "the serving certificate does not name localhost", sameCA: true, bundleLen: 1,
		},
		"garbage": {
			reason: "unreadable data is replaced, not an error", data: func(*testing.T) map[string][]byte {
				return map[string][]byte{CABundleKey: []byte("x"), CAKeyKey: []byte("y"), CertKey: []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), KeyKey: nil}
			},
			now: t0, hosts: hosts, wantReason: "no usable CA; no usable serving certificate", bundleLen: 1,
		},
		"foreign CA key": {
			reason: "a CA whose key is not in the Secret cannot sign: a new one is made", data: func(t *testing.T) map[string][]byte {
				d := fresh(t)
				d[CAKeyKey] = fresh(t)[CAKeyKey]
				return d
			},
			now: t0.Add(time.Hour), hosts: hosts, wantReason: "no usable CA", sameCert: true, bundleLen: 2,
		},
		"unknown issuer": {
			reason: "a serving certificate no published CA signed is replaced", data: func(t *testing.T) map[string][]byte {
				d := fresh(t)
				other := fresh(t)
				d[CertKey], d[KeyKey] = other[CertKey], other[KeyKey]
				return d
			},
			now: t0.Add(time.Hour), hosts: hosts, wantReason: "the serving certificate is not signed by a published CA", sameCA: true, bundleLen: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.data(t)
			next, reason := plan(t, tc.now, before, tc.hosts)
			if diff := cmp.Diff(tc.wantReason, reason); diff != "" {
				t.Errorf("%s: reason (-want +got):\n%s", tc.reason, diff)
			}
			bundle := parseCerts(next[CABundleKey])
			got := []any{len(bundle), sameFirst(before[CABundleKey], next[CABundleKey]), bytes.Equal(before[CertKey], next[CertKey])}
			if diff := cmp.Diff([]any{tc.bundleLen, tc.sameCA, tc.sameCert}, got); diff != "" {
				t.Errorf("%s: [CAs in the bundle, same CA, same serving certificate] (-want +got):\n%s", tc.reason, diff)
			}
			verify(t, tc.now, next, tc.hosts)
			if again, reason := plan(t, tc.now, next, tc.hosts); reason != "" || !equalData(again, next) {
				t.Errorf("%s: planning again changes it: %s", tc.reason, reason)
			}
		})
	}
}

// TestPlanOverTheYears steps through ten CA lifetimes: at every moment the serving certificate
// verifies against the bundle, and no step replaces the CA and the serving certificate together
// unless the certificate was no longer valid.
func TestPlanOverTheYears(t *testing.T) {
	var data map[string][]byte
	for now := t0; now.Before(t0.Add(300 * time.Hour)); now = now.Add(50 * time.Minute) {
		next, reason := plan(t, now, data, hosts)
		if reason != "" {
			t.Logf("%s: %s", now.Format(time.RFC3339), reason)
		}
		verify(t, now, next, hosts)
		if data != nil && !sameFirst(data[CABundleKey], next[CABundleKey]) && !strings.Contains(reason, "not valid now") {
			// A new CA must be trusted (in the published bundle) before a certificate it signed
			// is served: with a valid certificate, it is only added this step.
			if !bytes.Equal(data[CertKey], next[CertKey]) {
				t.Errorf("%s: a new CA and a new serving certificate at once (%s)", now, reason)
			}
		}
		data = next
	}
}

func TestPlanRefusesNonsense(t *testing.T) {
	cases := map[string]struct {
		hosts  []string
		policy Policy
		want   string
	}{
		"no hosts":      {nil, policy, "at least one host"},
		"zero lifetime": {hosts, Policy{CAValidity: time.Hour}, "must be positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Plan(t0, nil, tc.hosts, tc.policy); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestPlanKeepsOtherKeys(t *testing.T) {
	next, _ := plan(t, t0, map[string][]byte{"note": []byte("mine")}, hosts)
	if diff := cmp.Diff("mine", string(next["note"])); diff != "" {
		t.Errorf("a key Plan does not own (-want +got):\n%s", diff)
	}
}

// verify checks that the serving certificate and key belong together and that the certificate
// verifies, for every host, against the published bundle at now.
func verify(t *testing.T, now time.Time, data map[string][]byte, h []string) {
	t.Helper()
	certs := parseCerts(data[CertKey])
	key, err := parseKey(data[KeyKey])
	if len(certs) != 1 || err != nil || !samePublicKey(certs[0].PublicKey, key) {
		t.Fatalf("%s: the serving certificate and key do not belong together (%d certificates, %v)", now, len(certs), err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[CABundleKey]) {
		t.Fatalf("%s: no CA in the bundle", now)
	}
	for _, host := range h {
		if _, err := certs[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("%s: the serving certificate does not verify for %s: %v", now, host, err)
		}
	}
	if block, _ := pem.Decode(data[CAKeyKey]); block == nil {
		t.Errorf("%s: no CA key", now)
	}
}

func sameFirst(a, b []byte) bool {
	ca, cb := parseCerts(a), parseCerts(b)
	return len(ca) > 0 && len(cb) > 0 && ca[0].Equal(cb[0])
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
