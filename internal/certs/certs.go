// Package certs writes the certificates a Sluice deployment needs: a CA,
// and certificates it signs for hosts, good for both TLS server and client
// authentication (cluster members dial each other, and clients may present
// one). sluice-server --cluster-gen-certs uses it, and so do the tests. It
// holds no state.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Certificate lifetimes. Nodes read their certificates once, at Open, and
// Sluice has no rotation, so the node certificate lives as long as its CA
// rather than expiring under a running cluster.
const (
	caValidYears = 10
	// certBackdate covers clocks a little behind the one that issued.
	certBackdate = time.Hour
)

// Generate writes a new cluster CA and a node certificate signed by it
// to dir (created, mode 0700, if missing), as PEM files for PeerTLS:
//
//	ca.crt    the CA certificate: CAFile on every node
//	ca.key    the CA's key: keep it to issue more certificates (Issue), off the nodes if possible
//	node.crt  a certificate for every host in hosts: CertFile
//	node.key  its key: KeyFile
//
// Keys are ECDSA P-256, written mode 0600. The CA is valid for 10 years and
// the node certificate as long. hosts are the IP addresses and DNS names
// members dial (the host part of each node's advertised Raft address); one
// node.crt listing every node's host can be copied to all of them, or each
// node gets its own from Issue. No existing file is overwritten:
// if any of the four exists, Generate writes nothing.
func Generate(dir string, hosts []string) error {
	ips, dns, err := parseHosts(hosts)
	if err != nil {
		return err
	}
	for _, name := range []string{"ca.crt", "ca.key", "node.crt", "node.key"} {
		if err := mustNotExist(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("replication: certificates: %w", err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Sluice"}, CommonName: "Sluice cluster CA"},
		NotBefore:             now.Add(-certBackdate),
		NotAfter:              now.AddDate(caValidYears, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs node certificates only
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("replication: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	var written []string
	ok := false
	defer func() {
		if !ok { // leave no half-made set behind
			for _, p := range written {
				os.Remove(p)
			}
		}
	}()
	if written, err = writeKeyPair(dir, "ca", der, caKey, written); err != nil {
		return err
	}
	if written, err = issue(dir, "node", ips, dns, caCert, caKey, written); err != nil {
		return err
	}
	ok = true
	return nil
}

// Issue writes dir/name.crt and dir/name.key: a new node
// certificate for hosts, signed by the CA in dir/ca.crt and dir/ca.key
// (as Generate wrote them), for a node on another host. The node
// needs ca.crt, name.crt and name.key. Existing files are not
// overwritten; name is a plain file name other than "ca".
func Issue(dir, name string, hosts []string) error {
	if name == "" || name == "ca" || name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("replication: certificate name %q: want a plain file name other than \"ca\"", name)
	}
	ips, dns, err := parseHosts(hosts)
	if err != nil {
		return err
	}
	for _, ext := range []string{".crt", ".key"} {
		if err := mustNotExist(filepath.Join(dir, name+ext)); err != nil {
			return err
		}
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return err
	}
	written, err := issue(dir, name, ips, dns, caCert, caKey, nil)
	if err != nil {
		for _, p := range written {
			os.Remove(p)
		}
	}
	return err
}

// issue signs a node certificate and writes name.crt and name.key,
// appending what it wrote to written; the caller removes those files if
// it fails.
func issue(dir, name string, ips []net.IP, dns []string, caCert *x509.Certificate, caKey crypto.Signer, written []string) ([]string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return written, err
	}
	serial, err := randomSerial()
	if err != nil {
		return written, err
	}
	now := time.Now()
	cn := "Sluice node"
	if len(dns) > 0 {
		cn += " " + dns[0]
	} else if len(ips) > 0 {
		cn += " " + ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"Sluice"}, CommonName: cn},
		NotBefore:    now.Add(-certBackdate),
		// Never past the CA: a chain is only as valid as its root.
		NotAfter:    minTime(now.AddDate(caValidYears, 0, 0), caCert.NotAfter),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return written, fmt.Errorf("replication: node certificate: %w", err)
	}
	return writeKeyPair(dir, name, der, key, written)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// writeKeyPair writes name.crt (0644) and name.key (0600), never over an
// existing file.
func writeKeyPair(dir, name string, certDER []byte, key *ecdsa.PrivateKey, written []string) ([]string, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return written, err
	}
	files := []struct {
		path  string
		block *pem.Block
		perm  os.FileMode
	}{
		{filepath.Join(dir, name+".key"), &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}, 0o600},
		{filepath.Join(dir, name+".crt"), &pem.Block{Type: "CERTIFICATE", Bytes: certDER}, 0o644},
	}
	for _, f := range files {
		if err := writeNew(f.path, pem.EncodeToMemory(f.block), f.perm); err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}

func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("replication: %s already exists; not overwriting it", path)
		}
		return fmt.Errorf("replication: certificates: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("replication: write %s: %w", path, err)
	}
	return nil
}

func mustNotExist(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("replication: %s already exists; not overwriting it", path)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("replication: certificates: %w", err)
	}
}

// parseHosts splits hosts into IP and DNS SANs. A port is refused rather
// than put in a SAN that would never match.
func parseHosts(hosts []string) ([]net.IP, []string, error) {
	var ips []net.IP
	var dns []string
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if strings.ContainsAny(h, ":/ \t[]") {
			return nil, nil, fmt.Errorf("replication: certificate host %q: want an IP address or a DNS name, without a port", h)
		}
		dns = append(dns, h)
	}
	if len(ips)+len(dns) == 0 {
		return nil, nil, errors.New("replication: certificates need at least one host (IP address or DNS name) the nodes are dialled at")
	}
	return ips, dns, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// loadCA reads dir/ca.crt and dir/ca.key and checks that they belong
// together.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, fmt.Errorf("replication: CA certificate: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("replication: CA certificate %s: no PEM certificate in it", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("replication: CA certificate %s: %w", certPath, err)
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("replication: %s is not a CA certificate", certPath)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("replication: CA key: %w", err)
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("replication: CA key %s: no PEM block in it", keyPath)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		err = fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("replication: CA key %s: %w", keyPath, err)
	}
	signer, ok := key.(crypto.Signer)
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if pub, isEq := cert.PublicKey.(equaler); !ok || !isEq || !pub.Equal(signer.Public()) {
		return nil, nil, fmt.Errorf("replication: CA key %s does not match %s", keyPath, certPath)
	}
	return cert, signer, nil
}
