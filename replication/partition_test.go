package replication

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// linkProxy forwards one direction of dialling (from one node to another)
// and can be cut: cutting closes its connections and refuses new ones.
type linkProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *linkProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		d, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, d)
		p.wg.Add(2)
		go p.pipe(c, d)
		go p.pipe(d, c)
		p.mu.Unlock()
	}
}

func (p *linkProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

func (p *linkProxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}

// addrBook sends a node's Raft connections through the proxies.
type addrBook struct {
	mu sync.Mutex
	m  map[raft.ServerID]raft.ServerAddress
}

var errNoProxy = errors.New("no proxy for this server")

func (a *addrBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if addr, ok := a.m[id]; ok {
		return addr, nil
	}
	return "", errNoProxy
}

// netCluster is a cluster whose every link runs through a linkProxy.
type netCluster struct {
	*cluster
	links map[[2]string]*linkProxy // (dialler id, dialled id)
}

func newNetCluster(t *testing.T, size int) *netCluster {
	c := &cluster{t: t}
	books := map[*testNode]*addrBook{}
	for i := range size {
		book := &addrBook{m: map[raft.ServerID]raft.ServerAddress{}}
		c.tweak = func(cfg *Config) { cfg.addressProvider = book }
		books[c.add(i == 0)] = book
	}
	first := c.nodes[0]
	waitFor(t, 5*time.Second, "first node leads", first.IsLeader)
	nc := &netCluster{cluster: c, links: map[[2]string]*linkProxy{}}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a == b {
				continue
			}
			p := newLinkProxy(t, b.RaftAddr())
			nc.links[[2]string{a.ID(), b.ID()}] = p
			books[a].mu.Lock()
			books[a].m[raft.ServerID(b.ID())] = raft.ServerAddress(p.ln.Addr().String())
			books[a].mu.Unlock()
		}
	}
	for _, n := range c.nodes[1:] {
		if err := first.Join(n.ID(), n.RaftAddr(), n.ClientAddr()); err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	c.waitConverged()
	return nc
}

// isolate cuts (or heals) every link to and from n.
func (nc *netCluster) isolate(n *testNode, cut bool) {
	for pair, p := range nc.links {
		if pair[0] == n.ID() || pair[1] == n.ID() {
			p.setCut(cut)
		}
	}
}

// TestPartitionedLeader cuts the leader off under load: it must stop
// answering decisions (its proposals cannot commit, and its lease makes
// it step down), the majority elects a new leader that serves, and after
// the partition heals every node holds the same state, in which each
// admitted decision appears exactly once.
func TestPartitionedLeader(t *testing.T) {
	nc := newNetCluster(t, 3)
	old := nc.leader()
	fl := newFailoverLoad(nc.cluster)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { fl.worker(uint64(g)) })
	}
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	nc.isolate(old, true)

	waitFor(t, 5*time.Second, "the cut-off leader to step down", func() bool { return !old.IsLeader() })
	stepDown := time.Since(cut)
	waitFor(t, 10*time.Second, "the majority's leader to answer", func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		for n, at := range fl.firstOK {
			if n != old && at.After(cut) {
				return true
			}
		}
		return false
	})
	served := time.Since(cut)
	time.Sleep(300 * time.Millisecond)
	nc.isolate(old, false)
	time.Sleep(300 * time.Millisecond)
	fl.stop.Store(true)
	wg.Wait()
	t.Logf("cut-off leader stepped down after %v; new leader served after %v", stepDown, served)

	fl.mu.Lock()
	last := fl.lastOK[old]
	fl.mu.Unlock()
	// Decisions committed just before the cut may still be answered while
	// the FSM applies them; nothing proposed after it can commit.
	if last.After(cut.Add(150 * time.Millisecond)) {
		t.Errorf("the cut-off leader answered a decision %v after the cut", last.Sub(cut))
	}
	fl.check(t)
	for _, n := range nc.live() {
		n.Close() // while the links are up, so closing leaders hand over
	}
}
