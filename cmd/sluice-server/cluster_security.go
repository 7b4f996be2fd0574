package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/internal/certs"
	"github.com/sluicehq/sluice/replication"
)

// Cluster credentials: who may speak Raft to this node (tls-cluster, the
// cluster secret), and how this node authenticates when it asks a member
// to let it join (tls-replication, masteruser/masterauth).

// peerCredentials maps the flags onto the node's transport security.
func peerCredentials(o options) (*replication.PeerTLS, []byte, error) {
	var peer *replication.PeerTLS
	switch strings.ToLower(o.tlsCluster) {
	case "yes":
		if o.tls.CertFile == "" || o.tls.KeyFile == "" || o.tls.CAFile == "" {
			return nil, nil, errors.New("tls-cluster yes needs tls-cert-file, tls-key-file and tls-ca-cert-file (sluice-server --cluster-gen-certs DIR writes a set)")
		}
		peer = &replication.PeerTLS{CertFile: o.tls.CertFile, KeyFile: o.tls.KeyFile, CAFile: o.tls.CAFile}
	case "no", "":
	default:
		return nil, nil, fmt.Errorf("tls-cluster must be yes or no, not %q", o.tlsCluster)
	}
	var secret []byte
	switch {
	case o.clusterSecret != "" && o.clusterSecretFile != "":
		return nil, nil, errors.New("set cluster-secret or cluster-secret-file, not both")
	case o.clusterSecret != "":
		secret = []byte(o.clusterSecret)
	case o.clusterSecretFile != "":
		b, err := os.ReadFile(o.clusterSecretFile)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster-secret-file: %w", err)
		}
		// A trailing newline is an editor's, not the secret's.
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	return peer, secret, nil
}

// joinTLS is the TLS the join request uses (tls-replication yes): this
// node's certificate, and the CA the member's is checked against.
func joinTLS(o options) (*tls.Config, error) {
	if !strings.EqualFold(o.tlsRepl, "yes") {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tls.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.tls.CertFile, o.tls.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls-replication: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.tls.CAFile != "" {
		pem, err := os.ReadFile(o.tls.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls-replication: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-replication: %s holds no PEM certificate", o.tls.CAFile)
		}
	}
	return cfg, nil
}

// genCerts is --cluster-gen-certs DIR: a new cluster CA and a first node
// certificate, or, when DIR already holds the CA, one more node
// certificate signed by it, for the hosts other members dial.
func genCerts(dir, hosts string, out io.Writer) int {
	list := strings.Fields(hosts)
	if len(list) == 0 {
		list = []string{"127.0.0.1", "localhost"}
	}
	for _, h := range list {
		if _, _, err := net.SplitHostPort(h); err == nil {
			fmt.Fprintf(out, "sluice-server --cluster-gen-certs: %q: give hosts without ports\n", h)
			return 2
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err == nil {
		name := strings.NewReplacer(":", "_", "/", "_").Replace(list[0])
		if err := certs.Issue(dir, name, list); err != nil {
			fmt.Fprintf(out, "sluice-server --cluster-gen-certs: %v\n", err)
			return 1
		}
		fmt.Fprintf(out, "wrote %s and %s, signed by %s, for %s\n", filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"),
			filepath.Join(dir, "ca.crt"), strings.Join(list, ", "))
		return 0
	}
	if err := certs.Generate(dir, list); err != nil {
		fmt.Fprintf(out, "sluice-server --cluster-gen-certs: %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "wrote the cluster CA (%s, %s: keep ca.key offline) and a node certificate (%s, %s) for %s\n",
		filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), strings.Join(list, ", "))
	fmt.Fprintln(out, "run every node with: --tls-cluster yes --tls-cert-file <its .crt> --tls-key-file <its .key> --tls-ca-cert-file ca.crt")
	return 0
}
