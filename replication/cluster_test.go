package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

func TestElectionAndReplication(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	leaders := 0
	for _, n := range c.nodes {
		if n.IsLeader() {
			leaders++
		}
		v := n.ClusterView()
		if v.Leader.ID != l.ID() || v.Leader.ClientAddr != l.ClientAddr() || len(v.Nodes) != 3 {
			t.Errorf("%s sees leader %+v among %d nodes", n.ID()[:8], v.Leader, len(v.Nodes))
		}
		for _, m := range v.Nodes {
			if m.ClientAddr == "" || !m.Voter {
				t.Errorf("%s: member %+v lacks a client address or a vote", n.ID()[:8], m)
			}
		}
		if v.Self.ID != n.ID() || v.Self.ClientAddr != n.ClientAddr() {
			t.Errorf("self = %+v", v.Self)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	if v := l.ClusterView(); v.State != "Leader" || v.Term == 0 || v.CommitIndex == 0 {
		t.Errorf("leader view %+v", v)
	}

	// Decisions on the leader, several pipelines at once.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				b := run(l, slCheck(fmt.Sprintf("sl:%d", i%7), 50, 1), fwCheck(fmt.Sprintf("fw:%d:%d", g, i%5), 1000, 2), limitInfo("sl:0"))
				for j, r := range b.Replies[:2] {
					if r.Kind != engine.ReplyDecision {
						t.Errorf("pipeline %d/%d reply %d: %+v", g, i, j, r)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	// A read-only pipeline on the leader is served without the log.
	if b := run(l, limitInfo("sl:1")); b.Replies[0].Kind != engine.ReplyArray && b.Replies[0].Kind != engine.ReplyMap {
		t.Errorf("LIMIT.INFO on the leader: %+v", b.Replies[0])
	}
	c.waitConverged()
	for _, n := range c.nodes[1:] {
		sameState(t, c.nodes[0], n)
	}
	if len(dump(l.eng)) != 7+8*5 {
		t.Errorf("leader holds %d keys, want %d", len(dump(l.eng)), 7+8*5)
	}
	st := l.ReplicationStats()
	t.Logf("%d entries for %d commands", st.Entries, st.Commands)
	if st.Entries == 0 || st.Commands < 8*40*3 {
		t.Errorf("stats %+v", st)
	}
}

func TestFollowerRedirects(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	run(l, slCheck("user:{42}:a", 10, 1))
	c.waitConverged()
	for _, f := range c.live() {
		if f == l {
			continue
		}
		// Every command of a pipeline with a write is redirected, each
		// with its own key's slot.
		b := run(f, slCheck("user:{42}:a", 10, 1), limitInfo("k2"), engine.Command{Op: engine.OpFlushAll})
		for i, key := range []string{"42", "k2", ""} {
			m, ok := isMoved(b.Replies[i].Err)
			want := 0
			if key != "" {
				want = KeySlot([]byte(key))
			}
			if !ok || m.Addr != l.ClientAddr() || m.Slot != want {
				t.Errorf("reply %d = %+v, want MOVED %d %s", i, b.Replies[i], want, l.ClientAddr())
			}
		}
		// Reads are redirected too, unless the connection sent READONLY.
		if m, ok := isMoved(run(f, limitInfo("user:{42}:a")).Replies[0].Err); !ok || m.Addr != l.ClientAddr() {
			t.Errorf("read without READONLY not redirected")
		}
		r := runReadOnly(f, limitInfo("user:{42}:a")).Replies[0]
		if v, ok := infoField(r, "remaining"); !ok || v != 9 {
			t.Errorf("READONLY LIMIT.INFO on a follower = %+v, want remaining 9", r)
		}
		// READONLY does not let a follower decide.
		if _, ok := isMoved(runReadOnly(f, slCheck("x", 1, 1)).Replies[0].Err); !ok {
			t.Errorf("READONLY follower answered a decision")
		}
		// A peek (cost 0) is a read: the follower answers it from its state.
		if r := runReadOnly(f, slCheck("user:{42}:a", 10, 0)).Replies[0]; r.Kind != engine.ReplyDecision || r.Dec.Limited || r.Dec.Remaining != 9 {
			t.Errorf("READONLY peek on a follower = %+v, want remaining 9", r)
		}
		// Membership changes are the leader's too.
		if _, ok := isMoved(f.Join("someone", "127.0.0.1:1", "c:1")); !ok {
			t.Errorf("Join on a follower did not redirect")
		}
	}
	if got := c.nodes[1].ReplicationStats().Redirects + c.nodes[2].ReplicationStats().Redirects + c.nodes[0].ReplicationStats().Redirects; got == 0 {
		t.Error("no redirect counted")
	}
}

// failoverLoad drives decisions at whichever node leads and records every
// answer.
type failoverLoad struct {
	c       *cluster
	keys    []string
	limits  map[string]int64
	mu      sync.Mutex
	allowed map[string]int64
	unknown map[string]int64
	firstOK map[*testNode]time.Time // first decision each node answered
	lastOK  map[*testNode]time.Time // last decision each node answered
	moved   atomic.Int64
	stop    atomic.Bool
}

func (fl *failoverLoad) command(key string) engine.Command {
	if key[0] == 's' {
		return slCheck(key, fl.limits[key], 1)
	}
	return fwCheck(key, fl.limits[key], 1)
}

func (fl *failoverLoad) worker(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var target *testNode
	for !fl.stop.Load() {
		if target == nil || target.closed.Load() {
			target = fl.pick(rng)
			if target == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
		}
		b := &engine.Batch{}
		for range 4 {
			*b.Add() = fl.command(fl.keys[rng.IntN(len(fl.keys))])
		}
		target.Execute(b, time.Now().UnixNano())
		var retarget bool
		fl.mu.Lock()
		for i, r := range b.Replies {
			key := string(b.Cmds[i].Key)
			switch {
			case r.Kind == engine.ReplyDecision:
				if !r.Dec.Limited {
					fl.allowed[key]++
				}
				now := time.Now()
				if _, ok := fl.firstOK[target]; !ok {
					fl.firstOK[target] = now
				}
				fl.lastOK[target] = now
			case errors.Is(r.Err, engine.ErrOutcomeUnknown):
				fl.unknown[key]++
			case r.Kind == engine.ReplyError:
				// MOVED names the leader; TRYAGAIN, CLUSTERDOWN and a
				// closed node send the client looking for one.
				target = nil
				if m, ok := isMoved(r.Err); ok {
					fl.moved.Add(1)
					target = fl.byClientAddr(m.Addr)
				}
				retarget = true
			default:
				panic(fmt.Sprintf("unexpected reply %+v", r))
			}
		}
		fl.mu.Unlock()
		if retarget && (target == nil || target.closed.Load()) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func (fl *failoverLoad) pick(rng *rand.Rand) *testNode {
	live := fl.c.live()
	for _, n := range live {
		if n.IsLeader() {
			return n
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rng.IntN(len(live))]
}

func (fl *failoverLoad) byClientAddr(addr string) *testNode {
	for _, n := range fl.c.live() {
		if n.ClientAddr() == addr {
			return n
		}
	}
	return nil
}

// TestLeaderFailover stops the leader under load from several goroutines
// and checks that a new leader serves, that every admitted decision is in
// the survivors' state exactly once, and that no key exceeds its limit.
// Closing hands leadership over; a crash leaves the followers to notice
// the silence (HeartbeatTimeout, checked at random intervals of 1-2x it)
// and elect a leader, which with the default 500 ms timings takes 0.5-1.5 s
// and, when a pre-vote meets a follower that has not noticed yet, one more
// election timeout.
func TestLeaderFailover(t *testing.T) {
	t.Run("close", func(t *testing.T) { testFailover(t, false, 1500*time.Millisecond) })
	t.Run("crash", func(t *testing.T) { testFailover(t, true, 3*time.Second) })
}

func testFailover(t *testing.T, crash bool, bound time.Duration) {
	c := newCluster(t, 3, nil) // default timings: the bounds are for them
	old := c.leader()
	fl := newFailoverLoad(c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { fl.worker(uint64(g)) })
	}
	// Stopped before the nodes close, also when a check fails first.
	t.Cleanup(func() { fl.stop.Store(true); wg.Wait() })
	time.Sleep(700 * time.Millisecond)
	killed := time.Now()
	if err := old.close(!crash); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	go func() {
		for time.Since(killed) < 5*time.Second {
			for _, n := range c.live() {
				if n.IsLeader() {
					t.Logf("new leader %s after %v", n.ID()[:8], time.Since(killed))
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// A new leader serves within 1.5 s.
	var recovered time.Duration
	sluicetest.WaitFor(t, 10*time.Second, "a new leader to answer a decision", func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		for n, at := range fl.firstOK {
			if n != old && at.After(killed) {
				recovered = at.Sub(killed)
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond)
	fl.stop.Store(true)
	wg.Wait()
	t.Logf("new leader answered %v after the old one was closed", recovered)
	if recovered > bound {
		t.Errorf("new leader took %v to answer, want <= %v", recovered, bound)
	}

	fl.check(t)
}

func newFailoverLoad(c *cluster) *failoverLoad {
	fl := &failoverLoad{
		c:       c,
		limits:  map[string]int64{},
		allowed: map[string]int64{},
		unknown: map[string]int64{},
		firstOK: map[*testNode]time.Time{},
		lastOK:  map[*testNode]time.Time{},
	}
	// Sliding logs that run out during the test, and fixed windows that
	// never do (they count every admitted decision).
	for i := range 8 {
		k := fmt.Sprintf("sl:%d", i)
		fl.keys, fl.limits[k] = append(fl.keys, k), 400
		k = fmt.Sprintf("fw:%d", i)
		fl.keys, fl.limits[k] = append(fl.keys, k), 1<<40
	}
	return fl
}

// check waits for the live nodes to converge and compares their state
// with what the clients were told.
func (fl *failoverLoad) check(t *testing.T) {
	t.Helper()
	c := fl.c
	c.waitConverged()
	l := c.leader()
	for _, n := range c.live() {
		sameState(t, l, n)
	}
	var allowed, unknown int64
	for _, key := range fl.keys {
		allowed += fl.allowed[key]
		unknown += fl.unknown[key]
		r := run(l, limitInfo(key)).Replies[0]
		remaining, ok := infoField(r, "remaining")
		if !ok {
			t.Errorf("%s: no state (allowed %d)", key, fl.allowed[key])
			continue
		}
		state := fl.limits[key] - remaining
		// Each admitted decision is in the state once; a decision whose
		// outcome was unknown may or may not be.
		if state < fl.allowed[key] || state > fl.allowed[key]+fl.unknown[key] {
			t.Errorf("%s: state holds %d, clients saw %d admitted and %d unknown", key, state, fl.allowed[key], fl.unknown[key])
		}
		if state > fl.limits[key] || fl.allowed[key] > fl.limits[key] {
			t.Errorf("%s: %d admitted over a limit of %d", key, state, fl.limits[key])
		}
	}
	t.Logf("admitted %d, outcome unknown %d, redirects followed %d", allowed, unknown, fl.moved.Load())
	if allowed == 0 {
		t.Fatal("no decision admitted")
	}
}

func TestRestartCatchesUp(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 32
		cfg.TrailingLogs = 16
		cfg.SnapshotInterval = 100 * time.Millisecond
	})
	l := c.leader()
	load := func(round, n int) {
		for i := range n {
			run(l, slCheck(fmt.Sprintf("k:%d:%d", round, i%13), 1000, 1), fwCheck(fmt.Sprintf("f:%d", i%17), 1<<40, 2))
		}
	}
	load(1, 50)
	var f *testNode
	for _, n := range c.live() {
		if n != l {
			f = n
			break
		}
	}
	c.waitConverged()
	// The follower restarts from its own snapshot plus log...
	if err := f.raft.Snapshot().Error(); err != nil {
		t.Fatalf("follower snapshot: %v", err)
	}
	load(2, 20)
	c.waitConverged()
	f.Close()
	// ...and catches up on what it missed, by then only in the leader's
	// snapshot: the leader's log was compacted past the follower's end.
	load(3, 100)
	if err := l.raft.Snapshot().Error(); err != nil {
		t.Fatalf("leader snapshot: %v", err)
	}
	f2 := f.restart(t)
	c.nodes = append(c.nodes, f2)
	c.waitConverged()
	sameState(t, l, f2)
	load(4, 20)
	c.waitConverged()
	sameState(t, l, f2)
	if v := f2.ClusterView(); v.Leader.ClientAddr != l.ClientAddr() || len(v.Nodes) != 3 {
		t.Errorf("restarted node sees %+v", v)
	}

	// A whole group restarts from disk.
	for _, n := range c.live() {
		n.Close()
	}
	for _, n := range slices.Clone(c.nodes) {
		if n == f {
			continue // its directory is f2's
		}
		c.nodes = append(c.nodes, n.restart(t))
	}
	l2 := c.leader()
	c.waitConverged()
	sameState(t, l, l2) // l's engine still holds the state from before
	load2 := run(l2, slCheck("after", 1, 1))
	if load2.Replies[0].Kind != engine.ReplyDecision {
		t.Errorf("restarted group: %+v", load2.Replies[0])
	}
}

func TestAddAndRemoveNodes(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	for i := range 30 {
		run(l, slCheck(fmt.Sprintf("k:%d", i), 10, 1))
	}
	n4 := c.add(false)
	for range 2 { // idempotent
		c.join(n4)
	}
	c.waitConverged()
	sameState(t, l, n4)
	if v := n4.ClusterView(); len(v.Nodes) != 4 || v.Leader.ID != l.ID() {
		t.Fatalf("new node sees %+v", v)
	}
	if _, ok := isMoved(run(n4, slCheck("k:1", 10, 1)).Replies[0].Err); !ok {
		t.Error("new follower did not redirect")
	}

	var gone *testNode
	for _, n := range c.live() {
		if n != l && n != n4 {
			gone = n
			break
		}
	}
	for range 2 { // idempotent
		if err := l.Forget(gone.ID()); err != nil {
			t.Fatalf("forget: %v", err)
		}
	}
	gone.Close()
	if v := l.ClusterView(); len(v.Nodes) != 3 || slices.ContainsFunc(v.Nodes, func(m engine.NodeInfo) bool { return m.ID == gone.ID() }) {
		t.Fatalf("after forget: %+v", v.Nodes)
	}
	if _, ok := l.members.get(gone.ID()); ok {
		t.Error("forgotten node's client address kept")
	}
	// Three voters left: the group still decides.
	if r := run(l, slCheck("after", 10, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
		t.Fatalf("decision after forget: %+v", r)
	}
	c.waitConverged()
	sameState(t, l, n4)
}

func TestQuorumLoss(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	run(l, slCheck("k", 10, 1))
	c.waitConverged()
	for _, n := range c.live() {
		if n != l {
			n.Close()
		}
	}
	// A decision proposed as quorum goes away must not be redirected: it
	// is answered as unknown, or (if the leader had already stepped down
	// before proposing it) TRYAGAIN.
	r := run(l, slCheck("k", 10, 1)).Replies[0]
	if !errors.Is(r.Err, engine.ErrOutcomeUnknown) && !errors.Is(r.Err, engine.ErrTryAgain) {
		t.Fatalf("decision without quorum: %+v", r)
	}
	sluicetest.WaitFor(t, 5*time.Second, "the leader to step down", func() bool { return !l.IsLeader() })
	start := time.Now()
	sawTryAgain := false
	for {
		r := run(l, slCheck("k", 10, 1)).Replies[0]
		if errors.Is(r.Err, engine.ErrTryAgain) {
			sawTryAgain = true
		} else if errors.Is(r.Err, engine.ErrClusterDown) {
			break
		} else {
			t.Fatalf("decision without a leader: %+v", r)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("no CLUSTERDOWN after 5s without a leader")
		}
	}
	if !sawTryAgain {
		t.Error("no TRYAGAIN before CLUSTERDOWN")
	}
	// Inspection still works from the applied state.
	if v, ok := infoField(runReadOnly(l, limitInfo("k")).Replies[0], "remaining"); !ok || v != 9 {
		t.Errorf("READONLY read without a leader: remaining %d, %v", v, ok)
	}
}

func TestMaxMemoryIsTheLeaders(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	run(l, slCheck("old", 10, 1))
	for _, n := range c.live() {
		if n != l {
			// A follower's own limit does not matter: it applies the
			// leader's verdict.
			n.SetMaxMemory(1)
		}
	}
	l.SetMaxMemory(1)
	b := run(l, slCheck("new", 10, 1), slCheck("old", 10, 1))
	if !errors.Is(b.Replies[0].Err, engine.ErrOOM) || b.Replies[1].Kind != engine.ReplyDecision {
		t.Fatalf("over maxmemory: %+v", b.Replies)
	}
	l.SetMaxMemory(0)
	if r := run(l, slCheck("new2", 10, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
		t.Fatalf("under maxmemory: %+v", r)
	}
	c.waitConverged()
	for _, n := range c.live() {
		sameState(t, l, n)
	}
	if d := dump(l.eng); len(d) != 2 {
		t.Errorf("keys %v, want old and new2", d)
	}
	if l.MaxMemory() != 0 || c.live()[0].eng.MaxMemory() > 1 {
		t.Errorf("limits: node %d, engine %d", l.MaxMemory(), c.live()[0].eng.MaxMemory())
	}
}

// TestCloseWhileChangesAreQueued closes nodes while goroutines keep
// proposing membership changes and pipelines: Raft's Shutdown leaves a
// future still in its queues unanswered, so Close must let every one
// resolve first, or it (and a waiting caller) hangs for ever.
func TestCloseWhileChangesAreQueued(t *testing.T) {
	for round := range 6 {
		c := newCluster(t, 1, nil)
		n := c.nodes[0]
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					id := fmt.Sprintf("ghost-%d-%d-%d", round, g, i)
					if err := n.applyMember(memberChange{op: memberSet, id: id, raftAddr: "127.0.0.1:1", clientAddr: "c:1"}); err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				for i := 0; !n.closed.Load(); i++ {
					run(n, fwCheck(fmt.Sprintf("k:%d", i%50), 1<<40, 1))
				}
			})
		}
		time.Sleep(time.Duration(20+round*15) * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- n.close(round%2 == 0) }()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close did not return in 20s with changes queued", round)
		}
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: a caller still waits on a change 20s after Close", round)
		}
	}
}

// TestLeaderForgetsItselfUnderLoad: a leader that removes itself steps
// down, a survivor leads, and every pipeline sent to the old leader is
// answered; its Close then returns.
func TestLeaderForgetsItselfUnderLoad(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				run(l, fwCheck(fmt.Sprintf("k:%d:%d", g, i%20), 1<<40, 1))
			}
		})
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	time.Sleep(200 * time.Millisecond)
	if err := l.Forget(l.ID()); err != nil && !errors.Is(err, engine.ErrOutcomeUnknown) {
		t.Fatalf("forget self: %v", err)
	}
	sluicetest.WaitFor(t, 10*time.Second, "a survivor to lead", func() bool {
		for _, n := range c.live() {
			if n != l && n.IsLeader() {
				return true
			}
		}
		return false
	})
	// It steps down and stays up (Raft's default would shut it down from
	// inside, stranding the futures in its queues).
	sluicetest.WaitFor(t, 5*time.Second, "the old leader to step down", func() bool { return !l.IsLeader() })
	if st := l.raft.State(); st == raft.Shutdown {
		t.Errorf("the leader that forgot itself is %v, want a follower", st)
	}
	stop.Store(true)
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(20 * time.Second):
		t.Fatal("pipelines sent to the leader that forgot itself are still unanswered after 20s")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close of the leader that forgot itself did not return in 20s")
	}
}
