package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and every key pair the components use, written as
// PEM files into dir. Nothing here is meant to outlive the cluster: the CA is made per start and
// its certificates last a year.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

// keyPair is one PEM certificate and its PEM private key.
type keyPair struct {
	cert, key []byte
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sandbox-gitops-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, caPEM: pemBlock("CERTIFICATE", der)}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return nil, err
	}
	if err := p.write("ca.crt", p.caPEM); err != nil {
		return nil, err
	}
	return p, p.write("ca.key", keyPEM)
}

// path is where a file of the PKI lives.
func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) write(name string, data []byte) error {
	return os.WriteFile(p.path(name), data, 0o600)
}

// serving issues a serving certificate (the kube-apiserver's, and the real node's kubelet's):
// loopback, the names a Pod in the cluster would use, and ips (the API server's Service address;
// with a real node, the addresses the node reaches the API server and the API server reaches the
// kubelet at), and writes <name>.crt and <name>.key.
func (p *pki) serving(name string, ips ...net.IP) (keyPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
	})
}

// client issues a client certificate for user in groups (the API server reads the user from the
// common name and the groups from the organizations) and writes <name>.crt and <name>.key.
func (p *pki) client(name, user string, groups ...string) (keyPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *pki) issue(name string, tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("issuing %s: %w", name, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	kp := keyPair{cert: pemBlock("CERTIFICATE", der), key: keyPEM}
	if err := p.write(name+".crt", kp.cert); err != nil {
		return keyPair{}, err
	}
	return kp, p.write(name+".key", kp.key)
}

// serviceAccountKeys writes the key pair the API server signs and checks ServiceAccount tokens
// with (sa.key, sa.pub). RSA, because every consumer of the tokens accepts RS256.
func (p *pki) serviceAccountKeys() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := p.write("sa.key", keyPEM); err != nil {
		return err
	}
	return p.write("sa.pub", pemBlock("PUBLIC KEY", pub))
}

func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
