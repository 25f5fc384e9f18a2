package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds what the servers and the admin user need: a CA that signs the
// serving certificate, a CA that signs client certificates (the admin's,
// in system:masters), and the service-account signing key, as envtest
// makes them (ECDSA P-256, valid a week).
type pki struct {
	dir                     string
	servingCert, servingKey string
	clientCA                string
	saPublic, saPrivate     string
	servingCAPEM            []byte
	adminCertPEM, adminKey  []byte
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		dir:         dir,
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		clientCA:    filepath.Join(dir, "client-ca.crt"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
	}
	servingCA, err := newCA("ward-kube serving CA")
	if err != nil {
		return nil, err
	}
	p.servingCAPEM = servingCA.certPEM
	serving, err := servingCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	clientCA, err := newCA("ward-kube client CA")
	if err != nil {
		return nil, err
	}
	admin, err := clientCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	p.adminCertPEM, p.adminKey = admin.certPEM, admin.keyPEM
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	saKey, err := keyPEM(sa)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		p.servingCert: serving.certPEM,
		p.servingKey:  serving.keyPEM,
		p.clientCA:    clientCA.certPEM,
		p.saPublic:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		p.saPrivate:   saKey,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// clientTLS trusts the serving CA and presents the admin certificate.
func (p *pki) clientTLS() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.adminCertPEM, p.adminKey)
	if err != nil {
		return nil, err
	}
	return tlsConfig(p.servingCAPEM, cert)
}

// writeKubeconfig writes a kubeconfig for the admin user at server.
func (p *pki) writeKubeconfig(path, server string) error {
	b64 := base64.StdEncoding.EncodeToString
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kube-apiserver
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: kube-apiserver
  context:
    cluster: kube-apiserver
    user: admin
    namespace: default
current-context: kube-apiserver
`, server, b64(p.servingCAPEM), b64(p.adminCertPEM), b64(p.adminKey))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(config), 0o600)
}

// ca is a certificate authority: its certificate and key.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// issued is a certificate and its key, PEM-encoded.
type issued struct{ certPEM, keyPEM []byte }

func newCA(name string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, certPEM: certPEM(der)}, nil
}

// issue signs template (its subject, names and usages) with a new key.
func (c *ca) issue(template *x509.Certificate) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial()
	template.NotBefore = c.cert.NotBefore
	template.NotAfter = c.cert.NotAfter
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	k, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &issued{certPEM: certPEM(der), keyPEM: k}, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func poolOf(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no certificate in the CA's PEM")
	}
	return pool, nil
}
