package replication

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/certs"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

var testSecret = []byte("test cluster secret, 32+ bytes long")

// newCerts writes a fresh CA and node certificate for hosts and returns
// the PeerTLS naming them.
func newCerts(t testing.TB, hosts ...string) *PeerTLS {
	t.Helper()
	dir := t.TempDir()
	if err := certs.Generate(dir, hosts); err != nil {
		t.Fatal(err)
	}
	return &PeerTLS{
		CertFile: filepath.Join(dir, "node.crt"),
		KeyFile:  filepath.Join(dir, "node.key"),
		CAFile:   filepath.Join(dir, "ca.crt"),
	}
}

func mustAuth(t testing.TB, tlsFiles *PeerTLS, secret []byte) *peerAuth {
	t.Helper()
	a, err := loadPeerAuth(&Config{PeerTLS: tlsFiles, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testLayer listens on 127.0.0.1:0 with auth; tweak adjusts the limits.
func testLayer(t testing.TB, auth *peerAuth, tweak func(*Config)) *authLayer {
	t.Helper()
	cfg := Config{Dir: "unused", ClientAddr: "unused"}
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	l, err := listenAuth("127.0.0.1:0", nil, auth, &cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// handshakePair runs dial and accept on the two ends of a loopback TCP
// connection and returns their errors.
func handshakePair(t *testing.T, dial, accept func(net.Conn) error) (dialErr, acceptErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		done <- accept(c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	dialErr = dial(c)
	c.Close()
	return dialErr, <-done
}

// recorder keeps every byte written through it.
type recorder struct {
	net.Conn
	mu  *sync.Mutex
	out *bytes.Buffer
}

func (r recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func TestSecretHandshake(t *testing.T) {
	other := []byte("another secret, also long enough")
	side := func(secret []byte, role byte) func(net.Conn) error {
		return func(c net.Conn) error { return secretHandshake(c, secret, role) }
	}

	t.Run("same secret", func(t *testing.T) {
		var mu sync.Mutex
		var wire bytes.Buffer
		rec := func(f func(net.Conn) error) func(net.Conn) error {
			return func(c net.Conn) error { return f(recorder{c, &mu, &wire}) }
		}
		d, a := handshakePair(t, rec(side(testSecret, roleDialer)), rec(side(testSecret, roleAcceptor)))
		if d != nil || a != nil {
			t.Fatalf("dialer %v, acceptor %v", d, a)
		}
		if want := 2 * (len(secretHello) + nonceSize + 32); wire.Len() != want {
			t.Errorf("%d bytes on the wire, want %d", wire.Len(), want)
		}
		if bytes.Contains(wire.Bytes(), testSecret) || bytes.Contains(wire.Bytes(), testSecret[:8]) {
			t.Error("the secret went on the wire")
		}
	})
	t.Run("different secrets", func(t *testing.T) {
		d, a := handshakePair(t, side(other, roleDialer), side(testSecret, roleAcceptor))
		if !errors.Is(d, errSecretMismatch) || !errors.Is(a, errSecretMismatch) {
			t.Fatalf("dialer %v, acceptor %v; want both %v", d, a, errSecretMismatch)
		}
	})
	t.Run("echoed nonce", func(t *testing.T) {
		// A fake acceptor sends the dialer's own hello back.
		d, _ := handshakePair(t, side(testSecret, roleDialer), func(c net.Conn) error {
			buf := make([]byte, len(secretHello)+nonceSize)
			if _, err := io.ReadFull(c, buf); err != nil {
				return err
			}
			_, err := c.Write(buf)
			io.Copy(io.Discard, c)
			return err
		})
		if !errors.Is(d, errNonceReflected) {
			t.Fatalf("dialer %v, want %v", d, errNonceReflected)
		}
	})
	t.Run("reflected proof", func(t *testing.T) {
		// A fake acceptor without the secret returns the dialer's proof
		// as its own: the role in the MAC makes it worthless.
		d, _ := handshakePair(t, side(testSecret, roleDialer), func(c net.Conn) error {
			buf := make([]byte, len(secretHello)+nonceSize)
			if _, err := io.ReadFull(c, buf); err != nil {
				return err
			}
			buf[len(buf)-1] ^= 0xff // a nonce of its own
			if _, err := c.Write(buf); err != nil {
				return err
			}
			proof := make([]byte, 32)
			if _, err := io.ReadFull(c, proof); err != nil {
				return err
			}
			_, err := c.Write(proof)
			io.Copy(io.Discard, c)
			return err
		})
		if !errors.Is(d, errSecretMismatch) {
			t.Fatalf("dialer %v, want %v", d, errSecretMismatch)
		}
	})
	t.Run("not a handshake", func(t *testing.T) {
		_, a := handshakePair(t, func(c net.Conn) error {
			_, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n and some more bytes to fill the hello"))
			io.Copy(io.Discard, c)
			return err
		}, side(testSecret, roleAcceptor))
		if !errors.Is(a, errNotHandshake) {
			t.Fatalf("acceptor %v, want %v", a, errNotHandshake)
		}
	})
}

// readClosed reads c until it fails and returns how long that took and
// whether the peer closed it (rather than the read timing out).
func readClosed(c net.Conn, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return time.Since(start), !timedOut
}

func TestAuthLayerHandshakes(t *testing.T) {
	auth := mustAuth(t, nil, testSecret)
	client := testLayer(t, auth, nil)

	t.Run("a silent connection does not hold up the next", func(t *testing.T) {
		l := testLayer(t, auth, nil)
		silent, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		got := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		c, err := client.Dial(rAddr(l), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var in net.Conn
		select {
		case in = <-got:
		case <-time.After(2 * time.Second):
			t.Fatal("Accept did not return the authenticated connection")
		}
		defer in.Close()
		// The deadline is cleared and bytes flow both ways.
		time.Sleep(50 * time.Millisecond)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		l := testLayer(t, auth, func(c *Config) { c.handshakeTimeout = 200 * time.Millisecond })
		silent, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		took, closed := readClosed(silent, 3*time.Second)
		if !closed || took < 150*time.Millisecond {
			t.Fatalf("silent connection closed=%v after %v, want closed after ~200ms", closed, took)
		}
		sluicetest.WaitFor(t, time.Second, "the failure counted", func() bool { return l.failed.Load() == 1 })
	})

	t.Run("cap", func(t *testing.T) {
		l := testLayer(t, auth, func(c *Config) { c.maxHandshakes = 2 })
		var silent []net.Conn
		for range 2 {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			silent = append(silent, c)
		}
		sluicetest.WaitFor(t, 2*time.Second, "two handshakes pending", func() bool { return pendingCount(l) == 2 })
		extra, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		if took, closed := readClosed(extra, 2*time.Second); !closed || took > time.Second {
			t.Fatalf("connection over the cap closed=%v after %v, want at once", closed, took)
		}
		if _, err := client.Dial(rAddr(l), time.Second); err == nil {
			t.Fatal("a peer got in over a full cap")
		}
		// A slot frees when a pending handshake ends.
		silent[0].Close()
		sluicetest.WaitFor(t, 2*time.Second, "a slot to free", func() bool { return pendingCount(l) == 1 })
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := client.Dial(rAddr(l), 2*time.Second)
		if err != nil {
			t.Fatalf("dial with a free slot: %v", err)
		}
		c.Close()
		if l.refused.Load() != 2 {
			t.Errorf("refused %d, want 2", l.refused.Load())
		}
	})

	t.Run("per-host cap", func(t *testing.T) {
		l := testLayer(t, auth, func(c *Config) { c.maxHandshakesPerHost = 1 })
		first, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		sluicetest.WaitFor(t, 2*time.Second, "one handshake pending", func() bool { return pendingCount(l) == 1 })
		second, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		if _, closed := readClosed(second, time.Second); !closed {
			t.Fatal("a second connection from the same host got a slot")
		}
		// Another loopback source address is another host.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		third, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Skipf("no second loopback source address: %v", err)
		}
		defer third.Close()
		sluicetest.WaitFor(t, 2*time.Second, "another host's handshake pending", func() bool { return pendingCount(l) == 2 })
	})

	t.Run("close", func(t *testing.T) {
		l := testLayer(t, auth, nil) // 5 s handshakes: Close must not wait them out
		silent, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		sluicetest.WaitFor(t, 2*time.Second, "a handshake pending", func() bool { return pendingCount(l) == 1 })
		accepted := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			accepted <- err
		}()
		start := time.Now()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Close took %v", took)
		}
		select {
		case err := <-accepted:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v", err)
			}
		case <-time.After(time.Second):
			t.Fatal("Accept still blocked after Close")
		}
		if _, closed := readClosed(silent, time.Second); !closed {
			t.Error("pending connection not closed by Close")
		}
		if _, err := l.Dial(rAddr(client), time.Second); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Dial after Close: %v", err)
		}
		if l.failed.Load() != 0 {
			t.Errorf("handshakes aborted by Close counted as failures: %d", l.failed.Load())
		}
	})
}

func rAddr(l *authLayer) raft.ServerAddress { return raft.ServerAddress(l.Addr().String()) }

func pendingCount(l *authLayer) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

func TestProtectedMode(t *testing.T) {
	open := func(cfg Config) (*Node, error) {
		eng := engine.New(engine.Config{Shards: 2})
		t.Cleanup(eng.Close)
		cfg.ClientAddr = "client.test:7000"
		cfg.Logger = testLogger(t)
		n, err := Open(cfg, eng)
		if err == nil {
			t.Cleanup(func() { n.Close() })
		}
		return n, err
	}
	for _, a := range []struct{ raft, adv string }{
		{"127.0.0.1:0", "10.1.2.3:7000"},
		{"0.0.0.0:0", ""},
		{":0", ""},
		{"192.0.2.1:0", "127.0.0.1:7000"},
		{"127.0.0.1:0", "node1.example:7000"},
	} {
		dir := t.TempDir()
		_, err := open(Config{Dir: dir, RaftAddr: a.raft, AdvertiseRaftAddr: a.adv})
		if !errors.Is(err, ErrProtectedMode) {
			t.Fatalf("raft %q advertise %q without credentials: %v, want ErrProtectedMode", a.raft, a.adv, err)
		}
		for _, want := range []string{"tls-cluster yes", "tls-cert-file", "cluster-secret", "cluster-secret-file", "forge"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message lacks %q: %v", want, err)
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("refused Open wrote %d files", len(ents))
		}
	}
	t.Logf("message: %v", func() error {
		_, err := open(Config{Dir: t.TempDir(), AdvertiseRaftAddr: "10.1.2.3:7000"})
		return err
	}())

	// With credentials the same addresses open (nothing dials 10.1.2.3:
	// the node does not bootstrap).
	certs := newCerts(t, "127.0.0.1", "10.1.2.3")
	for _, c := range []Config{{Secret: testSecret}, {PeerTLS: certs}, {PeerTLS: certs, Secret: testSecret}} {
		c.Dir, c.RaftAddr, c.AdvertiseRaftAddr = t.TempDir(), "127.0.0.1:0", "10.1.2.3:7000"
		n, err := open(c)
		if err != nil {
			t.Fatalf("open with credentials: %v", err)
		}
		if n.RaftAddr() != "10.1.2.3:7000" || n.layer == nil || n.layer.Addr().String() != "10.1.2.3:7000" {
			t.Errorf("advertised raft address %q (layer %v)", n.RaftAddr(), n.layer)
		}
	}
	// Loopback without credentials is today's plain TCP.
	n, err := open(Config{Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", AdvertiseRaftAddr: "localhost:7000"})
	if err != nil || n.layer != nil {
		t.Fatalf("loopback without credentials: %v, layer %v", err, n)
	}

	if _, err := open(Config{Dir: t.TempDir(), Secret: []byte("short")}); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := open(Config{Dir: t.TempDir(), Secret: []byte{}}); err == nil {
		t.Error("an empty secret read as no secret")
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true, "127.3.4.5:7000": true, "[::1]:7000": true, "localhost:1": true, "LOCALHOST:1": true,
		"0.0.0.0:7000": false, ":7000": false, "[::]:7000": false, "10.0.0.1:1": false, "node1:7000": false,
		"127.0.0.1": false, "[::ffff:127.0.0.1]:1": true,
	} {
		if got := isLoopbackAddr(addr); got != want {
			t.Errorf("isLoopbackAddr(%q) = %v", addr, got)
		}
	}
}

func TestPeerTLSLoadErrors(t *testing.T) {
	a := newCerts(t, "127.0.0.1")
	b := newCerts(t, "127.0.0.1")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not pem"), 0o600)
	missing := filepath.Join(t.TempDir(), "missing.crt")
	for _, c := range []struct {
		p    PeerTLS
		want string
	}{
		{PeerTLS{CertFile: missing, KeyFile: a.KeyFile, CAFile: a.CAFile}, missing},
		{PeerTLS{CertFile: a.CertFile, KeyFile: missing, CAFile: a.CAFile}, missing},
		{PeerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile, CAFile: missing}, missing},
		{PeerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile, CAFile: garbage}, garbage},
		{PeerTLS{CertFile: garbage, KeyFile: a.KeyFile, CAFile: a.CAFile}, garbage},
		{PeerTLS{CertFile: a.CertFile, KeyFile: b.KeyFile, CAFile: a.CAFile}, a.CertFile},
		{PeerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile, CAFile: b.CAFile}, "does not verify"},
		{PeerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile}, "CA file"},
	} {
		_, err := loadPeerAuth(&Config{PeerTLS: &c.p})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.p, err, c.want)
		}
	}
}

// Certificates from certs load as a node's peer TLS.
func TestGeneratedCertsLoadAsPeerTLS(t *testing.T) {
	dir := t.TempDir()
	if err := certs.Generate(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := certs.Issue(dir, "node2", []string{"10.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node", "node2"} {
		p := &PeerTLS{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), CAFile: filepath.Join(dir, "ca.crt")}
		if _, err := loadPeerAuth(&Config{PeerTLS: p}); err != nil {
			t.Errorf("%s as PeerTLS: %v", name, err)
		}
	}
}
