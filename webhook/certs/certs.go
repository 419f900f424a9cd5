// Package certs decides when the conversion webhook's certificates must be made or renewed, and
// makes them, with crypto/x509 only. It reads and writes a Secret's data as plain bytes and takes
// the time as a value; the I/O (the Secret, the CRDs' caBundle) is package webhook's.
//
// The Secret holds a self-signed CA and a serving certificate it signed. ca.crt is the bundle
// the API server trusts: the current CA first, then earlier CAs until they expire. A new CA is
// published long before the serving certificate it signs, so rotation never interrupts
// conversion.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// The keys of the Secret's data. tls.crt and tls.key are the names cert-manager and
// controller-runtime's certificate watcher use too.
const (
	CABundleKey = "ca.crt"
	CAKeyKey    = "ca.key"
	CertKey     = "tls.crt"
	KeyKey      = "tls.key"
)

// Policy is how long certificates live. Each is renewed when less than a third of its life is
// left (cert-manager's default), so a daily check has months to act.
type Policy struct {
	CAValidity   time.Duration
	CertValidity time.Duration
}

// DefaultPolicy: a ten-year CA, a one-year serving certificate.
var DefaultPolicy = Policy{CAValidity: 10 * 365 * 24 * time.Hour, CertValidity: 365 * 24 * time.Hour}

// backdate is how far before now a new certificate becomes valid, for clocks a little behind.
const backdate = 5 * time.Minute

// Plan returns the Secret data to store at now so that the serving certificate is valid for
// hosts and signed by a CA in the bundle, and why it changed; an empty reason means data is
// fine as it is (next is then data). Anything unreadable is replaced, never an error: the Secret
// belongs to the controller.
func Plan(now time.Time, data map[string][]byte, hosts []string, p Policy) (next map[string][]byte, reason string, err error) {
	if len(hosts) == 0 {
		return nil, "", errors.New("the serving certificate needs at least one host name")
	}
	if p.CAValidity <= 0 || p.CertValidity <= 0 {
		return nil, "", fmt.Errorf("certificate lifetimes must be positive (CA %s, serving %s)", p.CAValidity, p.CertValidity)
	}
	bundle := validCerts(now, data[CABundleKey])
	caKey, _ := parseKey(data[CAKeyKey])
	var ca *x509.Certificate
	if len(bundle) > 0 && caKey != nil && samePublicKey(bundle[0].PublicKey, caKey) && bundle[0].IsCA {
		ca = bundle[0]
	}
	var reasons []string
	switch {
	case ca == nil:
		reasons = append(reasons, "no usable CA")
	case renewDue(now, ca, p.CAValidity):
		reasons = append(reasons, fmt.Sprintf("the CA expires at %s", ca.NotAfter.UTC().Format(time.RFC3339)))
		ca = nil
	}
	newCA := ca == nil
	if newCA {
		if ca, caKey, err = makeCA(now, p.CAValidity); err != nil {
			return nil, "", err
		}
		bundle = append([]*x509.Certificate{ca}, bundle...)
	}

	certPEM, keyPEM := data[CertKey], data[KeyKey]
	// A certificate that is merely due waits for the next check when the CA is new this time,
	// so that the new CA is trusted before anything it signed is served.
	if why, usable := servingProblem(now, certPEM, keyPEM, bundle, hosts, p.CertValidity); why != "" && !(newCA && usable) {
		reasons = append(reasons, why)
		if certPEM, keyPEM, err = newServingCert(now, ca, caKey, hosts, p.CertValidity); err != nil {
			return nil, "", err
		}
	}

	next = map[string][]byte{
		CABundleKey: encodeCerts(bundle),
		CAKeyKey:    encodeKey(caKey),
		CertKey:     certPEM,
		KeyKey:      keyPEM,
	}
	if len(reasons) == 0 && !bytes.Equal(next[CABundleKey], data[CABundleKey]) {
		reasons = append(reasons, "an earlier CA expired")
	}
	if len(reasons) == 0 {
		return data, "", nil
	}
	for k, v := range data { // keys this package does not own stay as they are
		if _, ok := next[k]; !ok {
			next[k] = v
		}
	}
	return next, strings.Join(reasons, "; "), nil
}

// servingProblem says why the serving certificate cannot stay, or "" if it can. A certificate
// signed by an earlier CA still in the bundle stays until it is due: so a new CA is published
// (and the API server trusts it) long before any replica serves a certificate it signed.
// usable reports whether the certificate works now (it is only due for renewal).
func servingProblem(now time.Time, certPEM, keyPEM []byte, bundle []*x509.Certificate, hosts []string, validity time.Duration) (why string, usable bool) {
	certs := parseCerts(certPEM)
	key, err := parseKey(keyPEM)
	if len(certs) == 0 || err != nil || !samePublicKey(certs[0].PublicKey, key) {
		return "no usable serving certificate", false
	}
	cert := certs[0]
	if now.Before(cert.NotBefore) || !now.Before(cert.NotAfter) {
		return "the serving certificate is not valid now", false
	}
	if !slices.ContainsFunc(bundle, func(ca *x509.Certificate) bool { return cert.CheckSignatureFrom(ca) == nil }) {
		return "the serving certificate is not signed by a published CA", false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return fmt.Sprintf("the serving certificate does not name %s", h), false
		}
	}
	if renewDue(now, cert, validity) {
		return fmt.Sprintf("the serving certificate expires at %s", cert.NotAfter.UTC().Format(time.RFC3339)), true
	}
	return "", true
}

// renewDue: less than a third of the intended life is left (or of the certificate's own, if
// that is shorter, as for a serving certificate cut off at its CA's expiry).
func renewDue(now time.Time, c *x509.Certificate, validity time.Duration) bool {
	life := min(validity, c.NotAfter.Sub(c.NotBefore))
	return c.NotAfter.Sub(now) < life/3
}

func makeCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("sandbox-gitops-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func newServingCert(now time.Time, ca *x509.Certificate, caKey crypto.Signer, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.NotAfter) { // a certificate cannot outlive its issuer
		tmpl.NotAfter = ca.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("making the serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key), nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// validCerts parses a PEM bundle and keeps the certificates valid at now, in order.
func validCerts(now time.Time, b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range parseCerts(b) {
		if !now.Before(c.NotBefore) && now.Before(c.NotAfter) {
			out = append(out, c)
		}
	}
	return out
}

func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // a bytes.Buffer never fails
	}
	return buf.Bytes()
}

func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, want ECDSA", k)
	}
	return ec, nil
}

func encodeKey(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // an ECDSA P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func samePublicKey(pub crypto.PublicKey, key *ecdsa.PrivateKey) bool {
	p, ok := pub.(*ecdsa.PublicKey)
	return ok && key != nil && p.Equal(&key.PublicKey)
}
