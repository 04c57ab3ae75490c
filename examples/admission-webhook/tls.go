package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// certReloader serves the certificate and key files as they are on disk:
// each TLS handshake reads both files and, when they changed, loads the
// new pair. A pair that does not load (a half-written rotation) leaves
// the previous one serving until the files are whole again.
type certReloader struct {
	certFile, keyFile string
	onLoad            func() // called after each successful load

	mu              sync.Mutex // guards certPEM, keyPEM, cert
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

func newCertReloader(certFile, keyFile string, onLoad func()) (*certReloader, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile, onLoad: onLoad}
	if _, err := c.GetCertificate(nil); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (c *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, err1 := os.ReadFile(c.certFile)
	keyPEM, err2 := os.ReadFile(c.keyFile)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err1 != nil || err2 != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("serving certificate: %v", firstErr(err1, err2))
	}
	if c.cert != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return c.cert, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("serving certificate %s, key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.certPEM, c.keyPEM = &pair, certPEM, keyPEM
	if c.onLoad != nil {
		c.onLoad()
	}
	return c.cert, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
