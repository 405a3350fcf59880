package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// CAValidity is how long a run CA and its leaves are valid. The CA lives
// as long as its run; a run that outlives it has its bound hosts fail
// verification in the sandbox rather than keep a long-lived trust anchor.
const CAValidity = 48 * time.Hour

// maxLeaves bounds the per-CA leaf cache (wildcard bindings can name many
// hosts); leaves beyond it are minted per connection.
const maxLeaves = 1024

// CA is a run's certificate authority: ECDSA P-256, valid for CAValidity,
// its key held only in this process. The sandbox trusts CertPEM; the
// gateway signs a leaf for each intercepted host with it.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey
	pem     []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA creates a fresh run CA.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, job.Wrap(job.CodeInternal, err, "egress CA key")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, job.Wrap(job.CodeInternal, err, "egress leaf key")
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agent-runner egress run CA", Organization: []string{"agent-runner"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, job.Wrap(job.CodeInternal, err, "egress CA certificate")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, job.Wrap(job.CodeInternal, err, "egress CA certificate")
	}
	return &CA{
		cert:    cert,
		key:     key,
		leafKey: leafKey,
		pem:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves:  map[string]*tls.Certificate{},
	}, nil
}

// CertPEM is the CA certificate the sandbox trusts, PEM-encoded.
func (c *CA) CertPEM() []byte { return append([]byte(nil), c.pem...) }

// leaf returns a server certificate for host signed by the CA, cached.
func (c *CA) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	cert, ok := c.leaves[host]
	c.mu.Unlock()
	if ok {
		return cert, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-5 * time.Minute),
		NotAfter:     c.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	cert = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: c.leafKey, Leaf: parsed}
	c.mu.Lock()
	if len(c.leaves) < maxLeaves {
		c.leaves[host] = cert
	}
	c.mu.Unlock()
	return cert, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // never fails with crypto/rand
	return n
}
