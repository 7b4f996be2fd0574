package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	hosts := []string{"127.0.0.1", "node1.example", "[::1]"}
	if err := Generate(dir, hosts); err != nil {
		t.Fatal(err)
	}
	perms := map[string]os.FileMode{"ca.crt": 0o644, "ca.key": 0o600, "node.crt": 0o644, "node.key": 0o600}
	for name, want := range perms {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^want != 0 || (want == 0o600 && got != 0o600) {
			t.Errorf("%s mode %v, want %v", name, got, want)
		}
	}
	ca, _, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if years := ca.NotAfter.Sub(time.Now()).Hours() / 24 / 365; years < 9.9 || years > 10.1 || !ca.IsCA {
		t.Errorf("CA valid %.1f years, IsCA %v", years, ca.IsCA)
	}
	leaf := readCert(t, filepath.Join(dir, "node.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, h := range []string{"127.0.0.1", "node1.example", "::1"} {
		for _, eku := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h, KeyUsages: []x509.ExtKeyUsage{eku}}); err != nil {
				t.Errorf("node.crt for %s, usage %v: %v", h, eku, err)
			}
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.9.9.9"}); err == nil {
		t.Error("node.crt valid for a host it does not name")
	}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("node key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")); err != nil {
		t.Fatal(err)
	}

	// No overwriting, and nothing written when refusing.
	before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err := Generate(dir, hosts); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second Generate: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(before, after) {
		t.Error("ca.key overwritten")
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "node.key"), []byte("keep"), 0o600)
	if err := Generate(other, hosts); err == nil {
		t.Error("Generate over an existing node.key")
	}
	if ents, _ := os.ReadDir(other); len(ents) != 1 {
		t.Errorf("refused Generate left %d files", len(ents))
	}
	for _, bad := range [][]string{nil, {""}, {"10.0.0.1:7000"}, {"a b"}} {
		if err := Generate(t.TempDir(), bad); err == nil {
			t.Errorf("hosts %q accepted", bad)
		}
	}

	// One more node certificate from the same CA.
	if err := Issue(dir, "node2", []string{"10.0.0.2", "node2.example"}); err != nil {
		t.Fatal(err)
	}
	n2 := readCert(t, filepath.Join(dir, "node2.crt"))
	if _, err := n2.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.2", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node2.crt: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "node2.key")); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node2.key mode %v", fi)
	}
	for _, name := range []string{"node2", "ca", "../x", "", ".hidden"} {
		if err := Issue(dir, name, []string{"10.0.0.3"}); err == nil {
			t.Errorf("Issue(%q) accepted", name)
		}
	}
	if err := Issue(t.TempDir(), "n", []string{"10.0.0.3"}); err == nil {
		t.Error("Issue without a CA")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(path, strings.TrimSuffix(path, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
