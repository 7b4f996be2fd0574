package replication

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

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

// netCluster is a cluster whose every link (one direction of dialling,
// from one node to another) runs through a fault proxy.
type netCluster struct {
	*cluster
	links map[[2]string]*faultproxy.Proxy // (dialler id, dialled id)
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
	sluicetest.WaitFor(t, 5*time.Second, "first node leads", first.IsLeader)
	nc := &netCluster{cluster: c, links: map[[2]string]*faultproxy.Proxy{}}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a == b {
				continue
			}
			p := sluicetest.Proxy(t, b.RaftAddr())
			nc.links[[2]string{a.ID(), b.ID()}] = p
			books[a].mu.Lock()
			books[a].m[raft.ServerID(b.ID())] = raft.ServerAddress(p.Addr())
			books[a].mu.Unlock()
		}
	}
	// The nodes close before their links do (cleanups run last first):
	// a leader closed with its links cut would wait out an election
	// timeout for its hand-over.
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	for _, n := range c.nodes[1:] {
		c.join(n)
	}
	c.waitConverged()
	return nc
}

// isolate cuts (or heals) every link to and from n.
func (nc *netCluster) isolate(n *testNode, cut bool) {
	for pair, p := range nc.links {
		if pair[0] == n.ID() || pair[1] == n.ID() {
			if cut {
				p.SetMode(faultproxy.Refuse)
			} else {
				p.SetMode(faultproxy.Forward)
			}
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
	// Stopped before the nodes close, also when a check fails first.
	t.Cleanup(func() { fl.stop.Store(true); wg.Wait() })
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	nc.isolate(old, true)

	sluicetest.WaitFor(t, 5*time.Second, "the cut-off leader to step down", func() bool { return !old.IsLeader() })
	stepDown := time.Since(cut)
	sluicetest.WaitFor(t, 10*time.Second, "the majority's leader to answer", func() bool {
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
