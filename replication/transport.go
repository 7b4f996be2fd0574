package replication

// Transport security. The Raft port carries the log itself: whoever can
// open a Raft session can append entries (reset any limiter), make replicas
// diverge or stall the group. So a node either authenticates every Raft
// connection, by mutual TLS against a cluster CA or by a shared-secret
// challenge-response, or it stays on loopback (protected mode). See
// DESIGN.md, "Transport security".

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// PeerTLS names the PEM files for mutual TLS between the members of a
// group. Every node presents its certificate both when it accepts a Raft
// connection and when it dials one, and accepts a peer only if the peer's
// certificate chains to the CA; a dialling node also checks that the
// certificate names the host it dialled. certs.Generate writes such files.
type PeerTLS struct {
	// CertFile is this node's certificate, optionally followed by
	// intermediates. It must be usable for both server and client
	// authentication, and name in its SANs every host (IP or DNS name)
	// other members dial this node at.
	CertFile string
	// KeyFile is CertFile's private key.
	KeyFile string
	// CAFile holds the cluster CA certificate(s) peers must chain to.
	CAFile string
}

// MinSecretLen is the shortest Config.Secret accepted. The handshake runs
// in the clear, so an eavesdropper holds the material to test guesses of
// the secret offline: it must be too long to guess (openssl rand -hex 32).
const MinSecretLen = 16

// ErrProtectedMode is returned (wrapped, with the address and the fix) by
// Open when neither Config.PeerTLS nor Config.Secret is set and RaftAddr or
// AdvertiseRaftAddr is not a loopback address.
var ErrProtectedMode = errors.New("replication: protected mode: refusing an unauthenticated Raft transport on a non-loopback address")

// Transport defaults (see Config.handshakeTimeout and friends).
const (
	// defaultHandshakeTimeout bounds one connection's authentication.
	// A real peer needs a round trip or two and some signing.
	defaultHandshakeTimeout = 5 * time.Second
	// defaultMaxHandshakes caps the connections authenticating at once;
	// beyond it new connections are closed at once, so a flood costs a
	// bounded number of goroutines and buffers.
	defaultMaxHandshakes = 64
	// defaultMaxHandshakesPerHost caps them per remote IP, so one host
	// cannot take every slot. A member opens at most a handful of
	// connections to another (raft pools 3, plus the pipeline and a
	// snapshot), so 16 leaves plenty.
	defaultMaxHandshakesPerHost = 16
	// refusalLogEvery limits the warnings about refused connections to
	// one per period: a flood must not become a flood of log lines.
	refusalLogEvery = 10 * time.Second
)

// errLayerClosed is what Accept and Dial return once the layer is closed.
var errLayerClosed = fmt.Errorf("replication: raft stream layer closed: %w", net.ErrClosed)

// peerAuth holds a node's credentials: TLS configs, the secret, or both
// (then TLS runs first and the secret handshake inside it).
type peerAuth struct {
	serverTLS *tls.Config // nil without TLS
	clientTLS *tls.Config // ServerName set per dial
	secret    []byte      // nil without a secret
}

func (a *peerAuth) mode() string {
	switch {
	case a == nil:
		return "none"
	case a.serverTLS != nil && a.secret != nil:
		return "tls+secret"
	case a.serverTLS != nil:
		return "tls"
	default:
		return "secret"
	}
}

// loadPeerAuth loads the credentials cfg names (nil for none) and applies
// the protected-mode rule when there are none.
func loadPeerAuth(cfg *Config) (*peerAuth, error) {
	if cfg.PeerTLS == nil && cfg.Secret == nil {
		return nil, checkProtectedMode(cfg)
	}
	a := &peerAuth{}
	if cfg.Secret != nil {
		// An empty secret (an empty secret file, say) is refused rather
		// than read as "no secret": the operator asked for one.
		if len(cfg.Secret) < MinSecretLen {
			return nil, fmt.Errorf("replication: the cluster secret has %d bytes; use at least %d (for example the output of openssl rand -hex 32)", len(cfg.Secret), MinSecretLen)
		}
		a.secret = bytes.Clone(cfg.Secret)
	}
	if cfg.PeerTLS != nil {
		var err error
		if a.serverTLS, a.clientTLS, err = cfg.PeerTLS.load(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// checkProtectedMode refuses an unauthenticated transport that others
// than this host could reach.
func checkProtectedMode(cfg *Config) error {
	for _, a := range []struct{ field, addr string }{
		{"RaftAddr", cfg.RaftAddr},
		{"AdvertiseRaftAddr", cfg.AdvertiseRaftAddr},
	} {
		if a.addr == "" || isLoopbackAddr(a.addr) {
			continue
		}
		return fmt.Errorf("%w (%s %s): anyone who can reach it could forge Raft entries (reset any limiter, say), make replicas diverge or stall the group. "+
			"Set tls-cluster yes with tls-cert-file, tls-key-file and tls-ca-cert-file (sluice-server --cluster-gen-certs DIR writes them), "+
			"or cluster-secret / cluster-secret-file, on every node (Config.PeerTLS or Config.Secret); or bind and advertise a loopback address",
			ErrProtectedMode, a.field, a.addr)
	}
	return nil
}

// isLoopbackAddr reports whether host:port names this host only: a
// loopback IP or "localhost". An empty host (every interface) or any other
// name is not loopback; names are not resolved, since what they resolve to
// can change.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// load reads the files and checks that the certificate chains to the CA
// for both uses, so a mismatched set fails at Open instead of at every
// handshake.
func (p *PeerTLS) load() (server, client *tls.Config, err error) {
	if p.CertFile == "" || p.KeyFile == "" || p.CAFile == "" {
		return nil, nil, errors.New("replication: peer TLS needs a certificate, a key and a CA file")
	}
	read := func(what, path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("replication: peer TLS %s: %w", what, err)
		}
		return b, nil
	}
	certPEM, err := read("certificate", p.CertFile)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := read("key", p.KeyFile)
	if err != nil {
		return nil, nil, err
	}
	caPEM, err := read("CA", p.CAFile)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("replication: peer TLS CA %s: no PEM certificate in it", p.CAFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("replication: peer TLS certificate %s with key %s: %w", p.CertFile, p.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("replication: peer TLS certificate %s: %w", p.CertFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, fmt.Errorf("replication: peer TLS certificate %s: intermediate: %w", p.CertFile, err)
		}
		inter.AddCert(c)
	}
	for _, use := range []struct {
		name string
		eku  x509.ExtKeyUsage
	}{{"server", x509.ExtKeyUsageServerAuth}, {"client", x509.ExtKeyUsageClientAuth}} {
		opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use.eku}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, nil, fmt.Errorf("replication: peer TLS certificate %s does not verify against the CA in %s for %s authentication: %w", p.CertFile, p.CAFile, use.name, err)
		}
	}
	server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
	}
	return server, client, nil
}

// accept authenticates a connection this node accepted. The caller sets
// the deadline.
func (a *peerAuth) accept(c net.Conn) (net.Conn, error) {
	if a == nil {
		return c, nil // no credentials: loopback only (checkProtectedMode)
	}
	if a.serverTLS != nil {
		tc := tls.Server(c, a.serverTLS)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		c = tc
	}
	if a.secret != nil {
		if err := secretHandshake(c, a.secret, roleAcceptor); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// dial authenticates a connection this node opened to host. The caller
// sets the deadline.
//
// Under TLS 1.3 the client finishes its handshake before the server has
// checked the client's certificate, so a server's refusal of this node
// surfaces at the first read rather than here; Raft's RPC then fails.
func (a *peerAuth) dial(c net.Conn, host string) (net.Conn, error) {
	if a == nil {
		return c, nil
	}
	if a.clientTLS != nil {
		cfg := a.clientTLS.Clone()
		cfg.ServerName = host // an IP literal is checked against IP SANs
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		c = tc
	}
	if a.secret != nil {
		if err := secretHandshake(c, a.secret, roleDialer); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// The shared-secret handshake. Both sides send hello | nonce at once; the
// dialer then proves it knows the secret, and only after checking that
// proof does the acceptor prove it in turn:
//
//	both:     secretHello (8) | nonce (32)
//	dialer:   HMAC-SHA256(secret, secretLabel | 'D' | dialer nonce | acceptor nonce)
//	acceptor: HMAC-SHA256(secret, secretLabel | 'A' | dialer nonce | acceptor nonce)
//
// Fresh nonces from both sides make every proof good for one connection
// only (no replay); the role byte makes a dialer's proof useless as an
// acceptor's and back (no reflection); the acceptor proving second means
// anyone who merely reaches the port gets no proof to test guesses
// against. The secret never goes on the wire. The connection is not
// encrypted or integrity-protected afterwards: an attacker on the path
// can read the Raft traffic, or take over a connection once it is
// authenticated. Use TLS where the network itself is not trusted.
const (
	roleDialer   byte = 'D'
	roleAcceptor byte = 'A'
	nonceSize         = 32
)

// secretHello opens the handshake: protocol name and version 1.
var secretHello = [8]byte{'S', 'L', 'R', 'A', 'F', 'T', 0, 1}

// secretLabel binds the proofs to this protocol and version, so they mean
// nothing to anything else keyed with the same secret.
var secretLabel = []byte("sluice raft cluster-secret handshake v1\x00")

var (
	errNotHandshake   = errors.New("replication: peer did not start the cluster-secret handshake")
	errSecretMismatch = errors.New("replication: peer does not know the cluster secret")
	errNonceReflected = errors.New("replication: peer sent back this node's nonce")
)

func secretProof(secret []byte, role byte, dialerNonce, acceptorNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(secretLabel)
	m.Write([]byte{role})
	m.Write(dialerNonce)
	m.Write(acceptorNonce)
	return m.Sum(nil)
}

func secretHandshake(c net.Conn, secret []byte, role byte) error {
	var mine, theirs [len(secretHello) + nonceSize]byte
	copy(mine[:], secretHello[:])
	if _, err := rand.Read(mine[len(secretHello):]); err != nil {
		return err
	}
	if _, err := c.Write(mine[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		return err
	}
	if !bytes.Equal(theirs[:len(secretHello)], secretHello[:]) {
		return errNotHandshake
	}
	myNonce, theirNonce := mine[len(secretHello):], theirs[len(secretHello):]
	if subtle.ConstantTimeCompare(myNonce, theirNonce) == 1 {
		return errNonceReflected
	}
	dn, an := myNonce, theirNonce
	if role == roleAcceptor {
		dn, an = theirNonce, myNonce
	}
	theirRole := roleAcceptor
	if role == roleAcceptor {
		theirRole = roleDialer
	}
	want := secretProof(secret, theirRole, dn, an)
	got := make([]byte, sha256.Size)
	if role == roleDialer {
		if _, err := c.Write(secretProof(secret, role, dn, an)); err != nil {
			return err
		}
	}
	if _, err := io.ReadFull(c, got); err != nil {
		if role == roleDialer && errors.Is(err, io.EOF) {
			// The acceptor hangs up on a wrong proof without a word.
			return fmt.Errorf("%w (it closed the connection after this node's proof)", errSecretMismatch)
		}
		return err
	}
	if !hmac.Equal(got, want) {
		return errSecretMismatch
	}
	if role == roleAcceptor {
		if _, err := c.Write(secretProof(secret, role, dn, an)); err != nil {
			return err
		}
	}
	return nil
}

// authLayer is a raft.StreamLayer that authenticates every connection
// both ways before Raft sees a byte of it.
//
// Accepting: one goroutine accepts TCP connections and hands each to a
// handshake goroutine with a deadline, so a slow or silent connection
// never stalls the others or Raft's own accept loop. At most maxPending
// handshakes run at once (maxPerHost per remote IP); a connection beyond
// either cap is closed at once. Accept returns authenticated connections
// only. Connections Raft already holds are not affected by a flood of new
// ones; new peer connections can be refused while the caps are full.
type authLayer struct {
	ln         net.Listener
	advertise  net.Addr
	auth       *peerAuth
	timeout    time.Duration
	maxPending int
	maxPerHost int
	log        *slog.Logger

	ready chan net.Conn // authenticated, for Accept
	done  chan struct{} // closed by Close
	// groups, when set, are the Raft groups sharing this listener (see
	// groupLayer): each connection names its group after authenticating,
	// and goes to that group's Accept rather than this layer's.
	groups    []*groupLayer
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // the accept loop and the handshakes

	mu         sync.Mutex
	closed     bool
	pending    map[net.Conn]struct{} // raw connections mid-handshake
	perHost    map[string]int
	lastWarn   time.Time
	unreported uint64

	// Counters, for tests and diagnosis.
	accepted atomic.Uint64 // authenticated
	failed   atomic.Uint64 // handshake failed or timed out
	refused  atomic.Uint64 // closed at once: a cap was full
}

var _ raft.StreamLayer = (*authLayer)(nil)

func listenAuth(bind string, advertise net.Addr, auth *peerAuth, cfg *Config, log *slog.Logger) (*authLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	l := &authLayer{
		ln:         ln,
		advertise:  advertise,
		auth:       auth,
		timeout:    cfg.handshakeTimeout,
		maxPending: cfg.maxHandshakes,
		maxPerHost: cfg.maxHandshakesPerHost,
		log:        log,
		ready:      make(chan net.Conn),
		done:       make(chan struct{}),
		pending:    map[net.Conn]struct{}{},
		perHost:    map[string]int{},
	}
	// Members dial the address this layer reports, so it must be a real
	// one (raft's TCP transport makes the same check).
	if a, ok := l.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("replication: raft address %s is not advertisable: set AdvertiseRaftAddr", l.Addr())
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *authLayer) acceptLoop() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			if l.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as raft's
			// own loop does, rather than spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.log.Warn("replication: raft listener", "err", err)
			select {
			case <-l.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		host := remoteHost(raw)
		if !l.admit(raw, host) {
			raw.Close()
			l.refused.Add(1)
			l.noteRefusal(raw.RemoteAddr(), "too many connections authenticating")
			continue
		}
		// The loop's own count keeps the group above zero, so this Add
		// never races Close's Wait.
		l.wg.Add(1)
		go l.handshake(raw, host)
	}
}

func (l *authLayer) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// admit registers raw as authenticating, unless a cap is full or the layer
// closed.
func (l *authLayer) admit(raw net.Conn, host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.pending) >= l.maxPending || l.perHost[host] >= l.maxPerHost {
		return false
	}
	l.pending[raw] = struct{}{}
	l.perHost[host]++
	return true
}

func (l *authLayer) release(raw net.Conn, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, raw)
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
}

func (l *authLayer) handshake(raw net.Conn, host string) {
	defer l.wg.Done()
	err := raw.SetDeadline(time.Now().Add(l.timeout))
	var c net.Conn
	if err == nil {
		c, err = l.auth.accept(raw)
	}
	var group *groupLayer
	if err == nil && l.groups != nil {
		group, err = l.readGroup(c)
	}
	if err == nil {
		// Raft keeps an accepted connection open while the peer uses it
		// and sets no deadlines of its own on it.
		err = c.SetDeadline(time.Time{})
	}
	l.release(raw, host)
	if err != nil {
		raw.Close()
		if !l.isClosed() {
			l.failed.Add(1)
			l.noteRefusal(raw.RemoteAddr(), err.Error())
		}
		return
	}
	l.accepted.Add(1)
	ready, done := l.ready, l.done
	if group != nil {
		ready, done = group.ready, group.done
	}
	select {
	case ready <- c:
	case <-done:
		c.Close()
	case <-l.done:
		c.Close()
	}
}

// noteRefusal logs a refused connection, at most once per refusalLogEvery,
// with the number refused since the last line.
func (l *authLayer) noteRefusal(remote net.Addr, reason string) {
	l.mu.Lock()
	l.unreported++
	now := time.Now()
	if now.Sub(l.lastWarn) < refusalLogEvery {
		l.mu.Unlock()
		return
	}
	n := l.unreported
	l.unreported, l.lastWarn = 0, now
	l.mu.Unlock()
	l.log.Warn("replication: refused a raft connection", "remote", remote.String(), "reason", reason, "refused_since_last_report", n)
}

func remoteHost(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// Accept returns the next authenticated connection, or an error once the
// layer is closed.
func (l *authLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, errLayerClosed
	}
}

// Close stops accepting, aborts the handshakes in progress and waits for
// the goroutines the layer started. Connections already handed to Raft
// are Raft's to close.
func (l *authLayer) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		for c := range l.pending {
			c.Close() // unblocks its handshake
		}
		l.mu.Unlock()
		close(l.done)
		l.closeErr = l.ln.Close()
		l.wg.Wait()
	})
	return l.closeErr
}

// Addr is the advertised address when there is one, else the bound one.
func (l *authLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.ln.Addr()
}

// Dial opens an authenticated connection to address. The handshake gets
// the smaller of raft's timeout and the handshake timeout; the deadline is
// cleared afterwards (raft sets its own per RPC).
func (l *authLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return l.dial(address, timeout, nil)
}

// dial opens an authenticated connection to address and, with then set,
// runs it on the connection within the handshake's deadline.
func (l *authLayer) dial(address raft.ServerAddress, timeout time.Duration, then func(net.Conn) error) (net.Conn, error) {
	if l.isClosed() {
		return nil, errLayerClosed
	}
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, fmt.Errorf("replication: raft address %q: %w", address, err)
	}
	if timeout <= 0 || timeout > l.timeout {
		timeout = l.timeout
	}
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	raw, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	c, err := l.dialHandshake(raw, host, deadline, then)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("replication: authenticating to %s: %w", address, err)
	}
	return c, nil
}

func (l *authLayer) dialHandshake(raw net.Conn, host string, deadline time.Time, then func(net.Conn) error) (net.Conn, error) {
	if err := raw.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c, err := l.auth.dial(raw, host)
	if err != nil {
		return nil, err
	}
	if then != nil {
		if err := then(c); err != nil {
			return nil, err
		}
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return c, nil
}

// newTransport builds the node's Raft transport: raft's plain TCP one
// without credentials (protected mode has confined it to loopback), the
// authenticating layer otherwise.
func (n *Node) newTransport(hlog hclog.Logger) (*raft.NetworkTransport, error) {
	cfg := &n.cfg
	var adv net.Addr
	if cfg.AdvertiseRaftAddr != "" {
		var err error
		if adv, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseRaftAddr); err != nil {
			return nil, fmt.Errorf("replication: advertise address: %w", err)
		}
	}
	tc := &raft.NetworkTransportConfig{
		MaxPool:               3,
		Timeout:               10 * time.Second,
		Logger:                hlog,
		ServerAddressProvider: cfg.addressProvider,
	}
	if cfg.stream != nil {
		// One of several groups sharing a listener (Groups).
		tc.Stream = cfg.stream
		return raft.NewNetworkTransportWithConfig(tc), nil
	}
	if n.auth == nil {
		trans, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, adv, tc)
		if err != nil {
			return nil, fmt.Errorf("replication: raft transport: %w", err)
		}
		return trans, nil
	}
	layer, err := listenAuth(cfg.RaftAddr, adv, n.auth, cfg, n.log)
	if err != nil {
		return nil, fmt.Errorf("replication: raft transport: %w", err)
	}
	n.layer = layer
	tc.Stream = layer
	// The transport owns the layer from here: its Close closes it.
	return raft.NewNetworkTransportWithConfig(tc), nil
}
