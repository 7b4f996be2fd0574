package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// TLSFiles are the client TLS settings, under Redis's names (tls-cert-file,
// tls-key-file, tls-ca-cert-file, tls-auth-clients, tls-protocols,
// tls-ciphers, tls-ciphersuites).
type TLSFiles struct {
	CertFile string // the server's certificate chain (PEM). Required.
	KeyFile  string // its private key (PEM). Required.
	// CAFile holds the CAs client certificates are checked against.
	// Required unless AuthClients is "no".
	CAFile string
	// AuthClients is yes (a client certificate is required), optional
	// (checked when given) or no. Default yes, as Redis.
	AuthClients string
	// Protocols, space separated: TLSv1.2, TLSv1.3. Default both.
	Protocols string
	// Ciphers are the TLS 1.2 cipher suites, colon separated, by their
	// IANA names (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 ...). Default:
	// Go's secure set.
	Ciphers string
	// CipherSuites are TLS 1.3's. Go always offers all three TLS 1.3
	// suites; names are checked, and a list that leaves some out is
	// refused rather than silently ignored.
	CipherSuites string
}

// TLS serves client TLS with settings that can be reloaded (SIGHUP,
// CONFIG SET tls-*) without dropping a connection: each handshake takes
// the settings current when it starts. Safe for concurrent use.
type TLS struct {
	mu    sync.Mutex // serializes reloads
	files TLSFiles
	cur   atomic.Pointer[tls.Config]
}

// NewTLS loads the files; an error names the one at fault.
func NewTLS(f TLSFiles) (*TLS, error) {
	t := &TLS{}
	if err := t.Reload(f); err != nil {
		return nil, err
	}
	return t, nil
}

// Config is what tls.NewListener takes: a shell whose
// GetConfigForClient hands every new handshake the current settings.
func (t *TLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.cur.Load(), nil
		},
	}
}

// Files are the settings in force.
func (t *TLS) Files() TLSFiles {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files
}

// Reload reads the files again (with f's settings) and, if they are good,
// puts them in force for the next handshakes; otherwise the old ones stay.
func (t *TLS) Reload(f TLSFiles) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cfg, err := buildTLSConfig(f)
	if err != nil {
		return err
	}
	t.files = f
	t.cur.Store(cfg)
	return nil
}

// setMany changes settings by their Redis names and reloads once.
func (t *TLS) setMany(changes map[string]string) error {
	f := t.Files()
	for name, value := range changes {
		switch name {
		case "tls-cert-file":
			f.CertFile = value
		case "tls-key-file":
			f.KeyFile = value
		case "tls-ca-cert-file":
			f.CAFile = value
		case "tls-auth-clients":
			f.AuthClients = value
		case "tls-protocols":
			f.Protocols = value
		case "tls-ciphers":
			f.Ciphers = value
		case "tls-ciphersuites":
			f.CipherSuites = value
		default:
			return errors.New("Unknown option or number of arguments for CONFIG SET")
		}
	}
	return t.Reload(f)
}

// values are the settings for CONFIG GET.
func (t *TLS) values() map[string]string {
	f := t.Files()
	auth := f.AuthClients
	if auth == "" {
		auth = "yes"
	}
	return map[string]string{
		"tls-cert-file": f.CertFile, "tls-key-file": f.KeyFile, "tls-ca-cert-file": f.CAFile,
		"tls-auth-clients": auth, "tls-protocols": f.Protocols, "tls-ciphers": f.Ciphers, "tls-ciphersuites": f.CipherSuites,
	}
}

func buildTLSConfig(f TLSFiles) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("TLS needs tls-cert-file and tls-key-file")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading tls-cert-file %s and tls-key-file %s: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch strings.ToLower(f.AuthClients) {
	case "", "yes":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "optional":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "no":
		cfg.ClientAuth = tls.NoClientCert
	default:
		return nil, fmt.Errorf("tls-auth-clients must be yes, no or optional, not %q", f.AuthClients)
	}
	if cfg.ClientAuth != tls.NoClientCert {
		if f.CAFile == "" {
			return nil, errors.New("tls-auth-clients needs tls-ca-cert-file to check client certificates against (or tls-auth-clients no)")
		}
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("loading tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca-cert-file %s holds no PEM certificate", f.CAFile)
		}
		cfg.ClientCAs = pool
	}
	if f.Protocols != "" {
		cfg.MinVersion, cfg.MaxVersion = 0, 0
		for _, p := range strings.Fields(f.Protocols) {
			var v uint16
			switch strings.ToLower(p) {
			case "tlsv1.2":
				v = tls.VersionTLS12
			case "tlsv1.3":
				v = tls.VersionTLS13
			default:
				return nil, fmt.Errorf("tls-protocols: %q is not TLSv1.2 or TLSv1.3 (older versions are not offered)", p)
			}
			if cfg.MinVersion == 0 || v < cfg.MinVersion {
				cfg.MinVersion = v
			}
			cfg.MaxVersion = max(cfg.MaxVersion, v)
		}
	}
	if f.Ciphers != "" {
		byName := map[string]uint16{}
		for _, cs := range tls.CipherSuites() {
			byName[cs.Name] = cs.ID
		}
		for _, name := range strings.Split(f.Ciphers, ":") {
			id, ok := byName[strings.TrimSpace(name)]
			if !ok {
				return nil, fmt.Errorf("tls-ciphers: %q is not a secure TLS 1.2 cipher suite Go offers (use IANA names, e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)", name)
			}
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
	}
	if f.CipherSuites != "" {
		all := map[string]bool{"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true}
		seen := map[string]bool{}
		for _, name := range strings.Split(f.CipherSuites, ":") {
			name = strings.TrimSpace(name)
			if !all[name] {
				return nil, fmt.Errorf("tls-ciphersuites: %q is not a TLS 1.3 cipher suite", name)
			}
			seen[name] = true
		}
		if len(seen) != len(all) {
			return nil, errors.New("tls-ciphersuites: Go always offers all three TLS 1.3 suites and cannot leave some out; list all three, or limit tls-protocols to TLSv1.2 and use tls-ciphers")
		}
	}
	return cfg, nil
}
