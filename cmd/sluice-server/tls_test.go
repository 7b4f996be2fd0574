package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/certs"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// tlsFiles is a CA, a server certificate for 127.0.0.1, a client
// certificate from the same CA, and one from another CA.
type tlsFiles struct {
	dir, ca, serverCert, serverKey, clientCert, clientKey, otherCert, otherKey string
}

func makeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir, other := t.TempDir(), t.TempDir()
	if err := certs.Generate(dir, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := certs.Issue(dir, "client", []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := certs.Generate(other, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	j := func(d, f string) string { return filepath.Join(d, f) }
	return tlsFiles{dir: dir, ca: j(dir, "ca.crt"), serverCert: j(dir, "node.crt"), serverKey: j(dir, "node.key"),
		clientCert: j(dir, "client.crt"), clientKey: j(dir, "client.key"), otherCert: j(other, "node.crt"), otherKey: j(other, "node.key")}
}

func (f tlsFiles) serverArgs() []string {
	return []string{"--port", "0", "--tls-port", "auto", "--tls-cert-file", f.serverCert, "--tls-key-file", f.serverKey,
		"--tls-ca-cert-file", f.ca, "--appendonly", "no"}
}

func (f tlsFiles) goRedis(t *testing.T, addr, cert, key string) *redis.Client {
	t.Helper()
	pem, _ := os.ReadFile(f.ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: cfg, Protocol: 2, MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// The clients users run connect over TLS and decide: redis-cli --tls,
// go-redis with TLSConfig, ioredis with tls, redis-py with ssl=True. With
// tls-auth-clients yes a client without a certificate, or with one from
// another CA, is refused. The plain port can be off (port 0: TLS only).
func TestTLSClients(t *testing.T) {
	cli := sluicetest.Require(t, "redis-cli")
	f := makeTLSFiles(t)
	ready, cmd := startBinaryReady(t, f.serverArgs()...)
	addr := ready["tls_addr"]
	if addr == "" || ready["addr"] != addr {
		t.Fatalf("TLS only: the ready line names %v", ready)
	}
	host, port, _ := strings.Cut(addr, ":")
	ctx := context.Background()

	redisCLI := func(args ...string) (string, error) {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(c, cli, append([]string{"--tls", "--cacert", f.ca, "-h", host, "-p", port}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := redisCLI("--cert", f.clientCert, "--key", f.clientKey, "CL.THROTTLE", "cli:tls", "4", "1", "60"); err != nil ||
		strings.Join(strings.Fields(out), " ") != "0 5 4 -1 60" {
		t.Fatalf("redis-cli --tls: %q %v", out, err)
	}
	if out, err := redisCLI("PING"); err == nil && out == "PONG" {
		t.Fatalf("redis-cli without a client certificate was served: %q", out)
	}

	if v, err := f.goRedis(t, addr, f.clientCert, f.clientKey).Do(ctx, "CL.THROTTLE", "go:tls", "4", "1", "60").Slice(); err != nil || v[2] != int64(4) {
		t.Fatalf("go-redis over TLS: %v %v", v, err)
	}
	if err := f.goRedis(t, addr, "", "").Ping(ctx).Err(); err == nil {
		t.Fatal("go-redis without a client certificate was served")
	}
	if err := f.goRedis(t, addr, f.otherCert, f.otherKey).Ping(ctx).Err(); err == nil {
		t.Fatal("go-redis with another CA's certificate was served")
	}

	runScript := func(name string, argv ...string) (string, error) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(c, argv[0], argv[1:]...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if node, ok := nodeClients(t); ok {
		out, err := runScript("ioredis", node, "../../internal/clients/node/tls.mjs", host, port, f.ca, f.clientCert, f.clientKey)
		if err != nil || out != "[0,5,4,-1,60]" {
			t.Errorf("ioredis over TLS: %q %v", out, err)
		}
		if out, err := runScript("ioredis", node, "../../internal/clients/node/tls.mjs", host, port, f.ca); err == nil {
			t.Errorf("ioredis without a client certificate was served: %q", out)
		}
	}
	if py, ok := pythonRedis(t); ok {
		out, err := runScript("redis-py", py, "../../internal/clients/python/tls.py", host, port, f.ca, f.clientCert, f.clientKey)
		if err != nil || out != "[0, 5, 4, -1, 60]" {
			t.Errorf("redis-py over TLS: %q %v", out, err)
		}
		if out, err := runScript("redis-py", py, "../../internal/clients/python/tls.py", host, port, f.ca); err == nil {
			t.Errorf("redis-py without a client certificate was served: %q", out)
		}
	}

	// New certificates on SIGHUP: an open connection goes on, new ones get
	// the new certificate.
	rdb := f.goRedis(t, addr, f.clientCert, f.clientKey)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("an open TLS connection after SIGHUP: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// CONFIG SET tls-cert-file swaps the server certificate for new
// handshakes without dropping open connections; a bad file is refused and
// the old one stays.
func TestTLSReloadByConfigSet(t *testing.T) {
	f := makeTLSFiles(t)
	ready, _ := startBinaryReady(t, append(f.serverArgs(), "--tls-auth-clients", "optional")...)
	addr := ready["tls_addr"]
	ctx := context.Background()
	open := f.goRedis(t, addr, f.clientCert, f.clientKey)
	if err := open.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// tls-auth-clients optional: no certificate is fine, a foreign one is not.
	if err := f.goRedis(t, addr, "", "").Ping(ctx).Err(); err != nil {
		t.Fatalf("optional client certificate, none given: %v", err)
	}
	before := servedSerial(t, f, addr)
	if err := open.Do(ctx, "CONFIG", "SET", "tls-cert-file", "/nonexistent").Err(); err == nil {
		t.Fatal("a missing certificate file was accepted")
	}
	// Reissue the server certificate (same key pair names, new serial) and
	// load it.
	if err := certs.Issue(f.dir, "server2", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := open.Do(ctx, "CONFIG", "SET", "tls-cert-file", filepath.Join(f.dir, "server2.crt"), "tls-key-file", filepath.Join(f.dir, "server2.key")).Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file: %v", err)
	}
	if v, err := open.Do(ctx, "CONFIG", "GET", "tls-cert-file").StringSlice(); err != nil || v[1] != filepath.Join(f.dir, "server2.crt") {
		t.Fatalf("CONFIG GET tls-cert-file: %v %v", v, err)
	}
	if err := open.Ping(ctx).Err(); err != nil {
		t.Fatalf("the open connection after the reload: %v", err)
	}
	fresh := f.goRedis(t, addr, f.clientCert, f.clientKey)
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("a new connection after the reload: %v", err)
	}
	if after := servedSerial(t, f, addr); after == before {
		t.Fatalf("new handshakes still get the old certificate (serial %s)", after)
	}
}

// servedSerial is the serial number of the certificate a new TLS
// handshake with addr gets.
func servedSerial(t *testing.T, f tlsFiles, addr string) string {
	t.Helper()
	pem, _ := os.ReadFile(f.ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// nodeClients finds node with the client packages installed (npm ci in
// internal/clients/node); under CI their absence fails the test.
func nodeClients(t *testing.T) (string, bool) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		if _, err = os.Stat("../../internal/clients/node/node_modules/ioredis"); err == nil {
			return node, true
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("node and ioredis are required under CI (npm ci in internal/clients/node): %v", err)
	}
	t.Logf("skipping the Node.js clients: %v", err)
	return "", false
}

// pythonRedis finds a python3 with redis-py (Debian's python3-redis is in
// /usr/bin/python3).
func pythonRedis(t *testing.T) (string, bool) {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(py); err == nil && exec.Command(path, "-c", "import redis").Run() == nil {
			return path, true
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("python3 with redis-py is required under CI (apt-get install python3-redis)")
	}
	t.Log("skipping redis-py: no python3 with the redis module")
	return "", false
}
