package replication

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// The key an attacker wants to reset: a login limiter that has run out.
const victimKey = "login:{victim}"

// forgedReset is a batch entry exactly as the batcher builds one, carrying
// LIMIT.RESET of key.
func forgedReset(key string) []byte {
	buf := appendBatchHeader(nil, batchHeader{now: time.Now().UnixNano(), origin: 0xbad, seq: 1})
	return engine.EncodeCommands(buf, []engine.Command{{Op: engine.OpDel, Flags: engine.FlagReset, Key: []byte(key)}})
}

// forgeAppend sends target, over trans, an AppendEntries that claims to
// lead target's current term, appends data right after target's last
// entry and commits it.
func forgeAppend(trans *raft.NetworkTransport, target *testNode, data []byte) (*raft.AppendEntriesResponse, error) {
	st := target.raft.Stats()
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	lastTerm, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	last := target.raft.LastIndex()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax,
			ID:              []byte("intruder"),
			Addr:            trans.EncodePeer("intruder", trans.LocalAddr()),
		},
		Term:              term,
		PrevLogEntry:      last,
		PrevLogTerm:       lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	err := trans.AppendEntries(raft.ServerID(target.ID()), raft.ServerAddress(target.RaftAddr()), req, &resp)
	return &resp, err
}

// plainTransport is what an outsider without credentials has: raft's own
// TCP transport.
func plainTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return trans
}

// layerTransport is a Raft transport over an authenticating layer with
// the given (wrong) credentials.
func layerTransport(t *testing.T, auth *peerAuth) *raft.NetworkTransport {
	t.Helper()
	l := testLayer(t, auth, nil)
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: l, MaxPool: 1, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger(),
	})
}

// tlsClientAuth presents certFile/keyFile and trusts caFile: an outsider
// who has the cluster's public CA certificate but a key of its own.
func tlsClientAuth(t *testing.T, cert *PeerTLS, caFile string, secret []byte) *peerAuth {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CA %s: %v", caFile, err)
	}
	client := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if cert != nil {
		kp, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		client.Certificates = []tls.Certificate{kp}
	}
	return &peerAuth{serverTLS: &tls.Config{}, clientTLS: client, secret: secret}
}

// TestForgedAppendEntriesWithoutAuth shows what the transport security is
// for: on an unauthenticated (loopback) group, anyone reaching a
// follower's Raft port commits a forged LIMIT.RESET there, and the
// follower's state silently diverges from the leader's. The protected
// tests below send the very same RPC.
func TestForgedAppendEntriesWithoutAuth(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	exhaust(t, l)
	c.waitConverged()
	var f *testNode
	for _, n := range c.live() {
		if n != l {
			f = n
		}
	}
	trans := plainTransport(t)
	defer trans.Close()
	resp, err := forgeAppend(trans, f, forgedReset(victimKey))
	if err != nil || !resp.Success {
		t.Fatalf("forged AppendEntries on an open port: %v, %+v", err, resp)
	}
	sluicetest.WaitFor(t, 5*time.Second, "the forged reset to apply on the follower", func() bool {
		_, ok := dump(f.eng)[victimKey]
		return !ok
	})
	if _, ok := dump(l.eng)[victimKey]; !ok {
		t.Fatal("the leader lost the key too")
	}
}

// exhaust runs the victim's limiter out on the leader.
func exhaust(t *testing.T, l *testNode) {
	t.Helper()
	for i := range 6 {
		r := run(l, slCheck(victimKey, 5, 1)).Replies[0]
		if r.Kind != engine.ReplyDecision || r.Dec.Limited != (i == 5) {
			t.Fatalf("check %d: %+v", i, r)
		}
	}
}

type secureMode struct {
	name       string
	tls        bool
	secret     bool
	flood      bool
	certs      *PeerTLS
	foreignTLS *PeerTLS // from another CA
}

func (m *secureMode) tweak(cfg *Config) {
	if m.tls {
		cfg.PeerTLS = m.certs
	}
	if m.secret {
		cfg.Secret = testSecret
	}
	// Short enough that the flood's stalled handshakes cycle.
	cfg.handshakeTimeout = time.Second
}

// TestSecureCluster runs a group in each authenticated mode: it elects,
// replicates and converges; outsiders without the credentials cannot get
// a forged entry in; under TLS a node with another CA's certificate never
// receives entries; and a flood of junk and stalled connections does not
// stop the leader committing.
func TestSecureCluster(t *testing.T) {
	certs := newCerts(t, "127.0.0.1")
	foreign := newCerts(t, "127.0.0.1")
	for _, m := range []*secureMode{
		{name: "tls", tls: true, flood: true},
		{name: "secret", secret: true, flood: true},
		{name: "tls+secret", tls: true, secret: true},
	} {
		m.certs, m.foreignTLS = certs, foreign
		t.Run(m.name, func(t *testing.T) {
			c := newCluster(t, 3, m.tweak)
			for _, n := range c.nodes {
				if n.layer == nil || n.auth.mode() != m.name {
					t.Fatalf("node %s transport mode %v", n.ID()[:8], n.auth)
				}
			}
			t.Run("replicates", func(t *testing.T) { testSecureReplication(t, c) })
			t.Run("outsiders", func(t *testing.T) { testOutsiders(t, c, m) })
			if m.tls {
				t.Run("foreign CA member", func(t *testing.T) { testForeignMember(t, c, m) })
			}
			if m.flood {
				t.Run("flood", func(t *testing.T) { testFlood(t, c, m) })
			}
		})
	}
}

func testSecureReplication(t *testing.T, c *cluster) {
	l := c.leader()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				b := run(l, slCheck(fmt.Sprintf("sl:%d", i%7), 50, 1), fwCheck(fmt.Sprintf("fw:%d:%d", g, i%5), 1000, 2))
				for j, r := range b.Replies {
					if r.Kind != engine.ReplyDecision {
						t.Errorf("pipeline %d/%d reply %d: %+v", g, i, j, r)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	c.waitConverged()
	for _, n := range c.nodes[1:] {
		sameState(t, c.nodes[0], n)
	}
	if got := len(dump(l.eng)); got != 7+4*5 {
		t.Errorf("leader holds %d keys, want %d", got, 7+4*5)
	}
}

func testOutsiders(t *testing.T, c *cluster, m *secureMode) {
	l := c.leader()
	exhaust(t, l)
	c.waitConverged()
	now := time.Now().UnixNano()
	before := map[*testNode]map[string]string{}
	term := l.raft.Stats()["term"]
	for _, n := range c.live() {
		before[n] = dumpAt(n.eng, now)
	}

	type outsider struct {
		name  string
		trans func() *raft.NetworkTransport
	}
	outsiders := []outsider{{"plain raft TCP transport", func() *raft.NetworkTransport { return plainTransport(t) }}}
	if m.tls {
		var secret []byte
		if m.secret {
			secret = testSecret // the certificate must matter even with the secret
		}
		outsiders = append(outsiders,
			outsider{"another CA's certificate", func() *raft.NetworkTransport {
				return layerTransport(t, tlsClientAuth(t, m.foreignTLS, m.certs.CAFile, secret))
			}},
			outsider{"no client certificate", func() *raft.NetworkTransport {
				return layerTransport(t, tlsClientAuth(t, nil, m.certs.CAFile, secret))
			}},
		)
	}
	if m.secret {
		wrong := []byte("not the cluster secret, but long")
		if m.tls {
			outsiders = append(outsiders,
				outsider{"valid certificate, wrong secret", func() *raft.NetworkTransport {
					return layerTransport(t, mustAuth(t, m.certs, wrong))
				}},
				outsider{"valid certificate, no secret", func() *raft.NetworkTransport {
					return layerTransport(t, mustAuth(t, m.certs, nil))
				}},
			)
		} else {
			outsiders = append(outsiders, outsider{"wrong secret", func() *raft.NetworkTransport {
				return layerTransport(t, mustAuth(t, nil, wrong))
			}})
		}
	}
	for _, o := range outsiders {
		trans := o.trans()
		t.Cleanup(func() { trans.Close() }) // also when a check fails first; closing twice is harmless
		for _, n := range c.live() {
			failed := n.layer.failed.Load()
			resp, err := forgeAppend(trans, n, forgedReset(victimKey))
			if err == nil {
				t.Errorf("%s: forged AppendEntries to %s succeeded: %+v", o.name, n.ID()[:8], resp)
				continue
			}
			t.Logf("%s -> %s: %v", o.name, n.ID()[:8], err)
			sluicetest.WaitFor(t, 5*time.Second, "the node to refuse the handshake", func() bool {
				return n.layer.failed.Load() > failed
			})
		}
		trans.Close()
	}

	// Nothing changed anywhere, and nobody was deposed.
	if got := c.leader(); got != l || l.raft.Stats()["term"] != term {
		t.Errorf("leadership moved: leader %s term %s, was %s term %s", got.ID()[:8], got.raft.Stats()["term"], l.ID()[:8], term)
	}
	for _, n := range c.live() {
		if after := dumpAt(n.eng, now); !maps.Equal(before[n], after) {
			t.Errorf("state of %s changed", n.ID()[:8])
		}
		if _, ok := dump(n.eng)[victimKey]; !ok {
			t.Errorf("%s lost the victim's limiter", n.ID()[:8])
		}
	}
	if r := run(l, slCheck(victimKey, 5, 1)).Replies[0]; r.Kind != engine.ReplyDecision || !r.Dec.Limited {
		t.Errorf("victim after the attempts: %+v", r)
	}
	c.waitConverged()
	for _, n := range c.live() {
		sameState(t, l, n)
	}
}

// testForeignMember joins a node whose certificate comes from another CA:
// the members refuse it and it refuses them, so it never receives an
// entry.
func testForeignMember(t *testing.T, c *cluster, m *secureMode) {
	l := c.leader()
	cfg := Config{Dir: t.TempDir(), ClientAddr: "foreign.test:7000", Logger: testLogger(t)}
	m.tweak(&cfg)
	cfg.PeerTLS = m.foreignTLS
	f := startNode(t, cfg) // not in c.nodes: it is never expected to catch up

	if err := l.Join(f.ID(), f.RaftAddr(), f.ClientAddr()); err != nil {
		t.Fatalf("join (the three others are a quorum of four): %v", err)
	}
	for i := range 20 {
		if r := run(l, slCheck(fmt.Sprintf("after-foreign:%d", i), 10, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
			t.Fatalf("decision with the foreign member configured: %+v", r)
		}
	}
	sluicetest.WaitFor(t, 5*time.Second, "the foreign node to refuse the leader's connections", func() bool {
		return f.layer.failed.Load() > 0
	})
	time.Sleep(300 * time.Millisecond)
	if f.AppliedIndex() != 0 || f.raft.LastIndex() != 0 || len(dump(f.eng)) != 0 {
		t.Errorf("foreign node received entries: applied %d, last %d, %d keys", f.AppliedIndex(), f.raft.LastIndex(), len(dump(f.eng)))
	}
	if _, id := f.raft.LeaderWithID(); id != "" {
		t.Errorf("foreign node knows leader %s", id)
	}
	// Its own handshake to the leader fails: the leader's certificate is
	// from a CA it does not trust.
	if conn, err := f.layer.Dial(raft.ServerAddress(l.RaftAddr()), 2*time.Second); err == nil {
		conn.Close()
		t.Error("the foreign node completed a handshake with the leader")
	} else {
		t.Logf("foreign dial: %v", err)
	}

	if err := l.Forget(f.ID()); err != nil {
		t.Fatalf("forget: %v", err)
	}
	f.Close()
	c.waitConverged()
	for _, n := range c.live() {
		sameState(t, l, n)
	}
}

// testFlood opens junk, stalled and half-finished connections to every
// node's Raft port for a while; the leader must keep committing, and a
// peer with the credentials must still get new connections through.
func testFlood(t *testing.T, c *cluster, m *secureMode) {
	l := c.leader()
	// The attacker is another host (another loopback source address; the
	// traffic still goes to 127.0.0.1), so the per-host cap leaves the
	// members room. Without one, the flood shares the members' address
	// and fills their slots too: then only the held connections are
	// tested, not new ones.
	attacker := &net.Dialer{Timeout: time.Second}
	probing := false
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		ln.Close()
		attacker.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
		probing = true
	} else {
		t.Logf("no second loopback address (%v): not probing new connections", err)
	}
	// A stalled handshake: the start of this mode's first message.
	prefix := secretHello[:]
	if m.tls {
		prefix = []byte{0x16, 0x03, 0x01, 0x02, 0x00} // a TLS record header promising 512 bytes
	}
	var before [][2]uint64
	for _, n := range c.live() {
		before = append(before, [2]uint64{n.layer.failed.Load(), n.layer.refused.Load()})
	}

	const window = 2500 * time.Millisecond
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var flood sync.WaitGroup
	var opened atomic.Int64
	for _, n := range c.live() {
		addr := n.RaftAddr()
		attack := func(kind int) {
			junk := make([]byte, 1024)
			for !stopped() {
				conn, err := attacker.Dial("tcp", addr)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				opened.Add(1)
				switch kind {
				case 0: // junk
					rand.Read(junk)
					conn.Write(junk)
				case 1: // say nothing
				case 2: // start a handshake and stall
					conn.Write(prefix)
				}
				// Hold it until the node hangs up: at once over a cap or
				// on junk, after the handshake timeout when stalled.
				conn.SetReadDeadline(time.Now().Add(3 * time.Second))
				io.Copy(io.Discard, conn)
				conn.Close()
				time.Sleep(5 * time.Millisecond)
			}
		}
		// 24 stalling connections per node: more than the per-host cap.
		for g := range 28 {
			kind := 1 + g%2
			if g < 4 {
				kind = 0
			}
			flood.Go(func() { attack(kind) })
		}
	}

	// Decisions committed in each half of the window: the leader must keep
	// committing throughout, not just before the flood builds up.
	var halves [2]atomic.Int64
	var failed atomic.Int64
	var work sync.WaitGroup
	start := time.Now()
	// A member's new connections: they must authenticate past the
	// stalled handshakes, since each runs in its own goroutine.
	var probes, probeFailures atomic.Int64
	if probing {
		var secret []byte
		var files *PeerTLS
		if m.secret {
			secret = testSecret
		}
		if m.tls {
			files = m.certs
		}
		member := testLayer(t, mustAuth(t, files, secret), nil)
		work.Go(func() {
			time.Sleep(window / 5) // let the flood fill the slots
			for time.Since(start) < window {
				for _, n := range c.live() {
					conn, err := member.Dial(raft.ServerAddress(n.RaftAddr()), 2*time.Second)
					if err != nil {
						probeFailures.Add(1)
						t.Errorf("a member's new connection to %s during the flood: %v", n.ID()[:8], err)
						continue
					}
					probes.Add(1)
					conn.Close()
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for g := range 4 {
		work.Go(func() {
			for i := 0; time.Since(start) < window; i++ {
				r := run(l, fwCheck(fmt.Sprintf("flood:%d:%d", g, i%10), 1<<40, 1)).Replies[0]
				if r.Kind != engine.ReplyDecision || r.Dec.Limited {
					failed.Add(1)
					t.Errorf("decision during the flood: %+v", r)
					return
				}
				halves[min(1, int(2*time.Since(start)/window))].Add(1)
			}
		})
	}
	work.Wait()
	close(stop)
	flood.Wait()

	var refused, hungUp uint64
	for i, n := range c.live() {
		hungUp += n.layer.failed.Load() - before[i][0]
		refused += n.layer.refused.Load() - before[i][1]
	}
	t.Logf("%d+%d decisions committed during %v of flood (%d connections opened; %d handshakes failed or timed out, %d refused over the caps; %d new member connections)",
		halves[0].Load(), halves[1].Load(), window, opened.Load(), hungUp, refused, probes.Load())
	if probing && probes.Load() < 10 {
		t.Errorf("only %d new member connections during the flood", probes.Load())
	}
	// Every decision commits; the minimum is far below what a loaded
	// 2-core machine manages (hundreds), only proof of progress.
	if failed.Load() != 0 || halves[0].Load() < 10 || halves[1].Load() < 10 {
		t.Errorf("decisions committed %d then %d, %d failed during the flood", halves[0].Load(), halves[1].Load(), failed.Load())
	}
	if refused == 0 || hungUp == 0 {
		t.Errorf("the flood did not reach the caps (%d refused) or the deadlines (%d failed)", refused, hungUp)
	}
	c.waitConverged()
	for _, n := range c.live() {
		sameState(t, l, n)
	}
}
