package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// groupsNode is one in-process node of a several-group cluster.
type groupsNode struct {
	*Groups
	engines []*engine.Engine
}

// startGroupsCluster starts size nodes of groups groups each on loopback:
// the first bootstraps, the others join through it (following redirects
// as --cluster-join does), and it waits until each group has a leader and
// every member. With balance set the balancer spreads the leaders.
func startGroupsCluster(t testing.TB, size, groups int, balance bool, tweak func(*Config)) []*groupsNode {
	t.Helper()
	var nodes []*groupsNode
	gc := GroupsConfig{BalanceInterval: -1}
	// The nodes' client addresses are names, not ports: a node is up
	// while it is open.
	var nodesMu sync.Mutex
	gc.probe = func(addr string) bool {
		nodesMu.Lock()
		defer nodesMu.Unlock()
		for _, n := range nodes {
			if n.ClientAddr() == addr {
				return !n.Group(0).closed.Load()
			}
		}
		return false
	}
	if balance {
		gc.BalanceInterval = 200 * time.Millisecond
	}
	for i := range size {
		cfg := Config{Dir: t.TempDir(), ClientAddr: fmt.Sprintf("node-%d.test:%d", i, 7100+i), Bootstrap: i == 0, Logger: testLogger(t)}
		if tweak != nil {
			tweak(&cfg)
		}
		engines := make([]*engine.Engine, groups)
		for g := range engines {
			engines[g] = engine.New(engine.Config{Shards: 4})
		}
		gs, err := OpenGroups(cfg, gc, engines)
		if err != nil {
			t.Fatal(err)
		}
		n := &groupsNode{Groups: gs, engines: engines}
		t.Cleanup(func() {
			n.Close()
			for _, e := range engines {
				e.Close()
			}
		})
		nodesMu.Lock()
		nodes = append(nodes, n)
		nodesMu.Unlock()
		if i == 0 {
			sluicetest.WaitFor(t, 10*time.Second, "the first node to lead every group", func() bool {
				for g := range groups {
					if !gs.Group(g).IsLeader() {
						return false
					}
				}
				return true
			})
			continue
		}
		via := nodes[0].Groups
		sluicetest.WaitFor(t, 20*time.Second, "the node to join every group", func() bool {
			err := via.Join(gs.ID(), gs.RaftAddr(), gs.ClientAddr())
			var moved *engine.MovedError
			if errors.As(err, &moved) {
				for _, o := range nodes {
					if o.ClientAddr() == moved.Addr {
						via = o.Groups
					}
				}
			}
			return err == nil
		})
	}
	sluicetest.WaitFor(t, 20*time.Second, "every group to know every member", func() bool {
		for _, n := range nodes {
			for g := range groups {
				v := n.Group(g).ClusterView()
				if v.Leader.ID == "" || len(v.Nodes) != size {
					return false
				}
			}
		}
		return true
	})
	return nodes
}

// leaderOfGroup is the node leading group g.
func leaderOfGroup(t testing.TB, nodes []*groupsNode, g int) *groupsNode {
	t.Helper()
	var l *groupsNode
	sluicetest.WaitFor(t, 10*time.Second, "a leader for the group", func() bool {
		for _, n := range nodes {
			if n.Group(g).IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func keyOfGroup(prefix string, g, groups int) string {
	r := GroupSlots(g, groups)
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if s := KeySlot([]byte(k)); s >= r.First && s <= r.Last {
			return k
		}
	}
}

func TestGroupSlotsCoverTheKeySpace(t *testing.T) {
	for n := 1; n <= 16; n++ {
		next := 0
		for g := range n {
			r := GroupSlots(g, n)
			if r.First != next || r.Last < r.First {
				t.Fatalf("%d groups: group %d has %+v after slot %d", n, g, r, next-1)
			}
			gs := &Groups{nodes: make([]*Node, n)}
			if gs.groupOfSlot(r.First) != g || gs.groupOfSlot(r.Last) != g {
				t.Fatalf("%d groups: group %d's range %+v maps to %d..%d", n, g, r, gs.groupOfSlot(r.First), gs.groupOfSlot(r.Last))
			}
			next = r.Last + 1
		}
		if next != Slots {
			t.Fatalf("%d groups end at slot %d", n, next-1)
		}
	}
}

// TestGroupsPipelineAcrossGroups: a pipeline over keys of every group is
// answered in order, each command by its group; a command whose keys span
// groups gets CROSSSLOT and changes nothing; SCAN walks every group the
// node leads.
func TestGroupsPipelineAcrossGroups(t *testing.T) {
	nodes := startGroupsCluster(t, 1, 3, false, nil)
	n := nodes[0]
	var keys []string
	var cmds []engine.Command
	for g := range 3 {
		k := keyOfGroup("p", g, 3)
		keys = append(keys, k)
		cmds = append(cmds, fwCheck(k, 10, 3))
	}
	cross := engine.Command{Op: engine.OpDel, Sub: []engine.Command{{Op: engine.OpDel, Key: []byte(keys[0])}, {Op: engine.OpDel, Key: []byte(keys[1])}}}
	cmds = append(cmds, cross, fwCheck(keys[2], 10, 1))
	b := run(n, cmds...)
	for i := range 3 {
		if r := b.Replies[i]; r.Kind != engine.ReplyDecision || r.Dec.Remaining != 7 {
			t.Fatalf("reply %d: %+v", i, r)
		}
	}
	if r := b.Replies[3]; !errors.Is(r.Err, engine.ErrCrossSlot) {
		t.Fatalf("DEL across groups: %+v", r)
	}
	if r := b.Replies[4]; r.Kind != engine.ReplyDecision || r.Dec.Remaining != 6 {
		t.Fatalf("the command after the refused one: %+v", r)
	}
	for g, k := range keys {
		if got := dump(n.engines[g])[k]; got == "" {
			t.Fatalf("group %d's engine lacks its key %s", g, k)
		}
		for o := range 3 {
			if o != g && dump(n.engines[o])[k] != "" {
				t.Fatalf("group %d's engine holds %s, a key of group %d", o, k, g)
			}
		}
	}
	// SCAN from cursor 0 to 0 sees every key once.
	var seen []string
	cursor := int64(0)
	for range 100 {
		b := run(n, engine.Command{Op: engine.OpScan, N: [4]int64{cursor, 10}})
		r := b.Replies[0]
		if r.Kind != engine.ReplyArray || len(r.Items) != 2 {
			t.Fatalf("SCAN: %+v", r)
		}
		for _, k := range r.Items[1].Items {
			seen = append(seen, string(k.Bulk)+k.Str)
		}
		var next int64
		fmt.Sscan(replyText(r.Items[0]), &next)
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(seen)
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Fatalf("SCAN saw %q, want %q", seen, want)
	}
}

// TestGroupsBalanceLeaders: three nodes of three groups, bootstrapped on
// one, end with one leader each.
func TestGroupsBalanceLeaders(t *testing.T) {
	nodes := startGroupsCluster(t, 3, 3, true, nil)
	sluicetest.WaitFor(t, 30*time.Second, "one group led by each node", func() bool {
		for _, n := range nodes {
			led := 0
			for g := range 3 {
				if n.Group(g).IsLeader() {
					led++
				}
			}
			if led != 1 {
				return false
			}
		}
		return true
	})
}

// BenchmarkGroupsDecisions: the same three nodes in one process (real TCP
// on loopback, bbolt with or without fsync), running one Raft group or three, each
// group led by a different node; 50 goroutines send pipelines of 16
// decisions, each pipeline to one group's leader over that group's keys.
// One b.N is one decision. cpu-us/decision is the process's CPU (all
// three nodes and the goroutines that drive them) per decision.
func BenchmarkGroupsDecisions(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		for _, clients := range []int{50, 200} {
			for _, groups := range []int{1, 3} {
				b.Run(fmt.Sprintf("fsync=%v/clients=%d/groups=%d", fsync, clients, groups), func(b *testing.B) {
					benchGroups(b, groups, clients, 16, !fsync)
				})
			}
		}
	}
}

func benchGroups(b *testing.B, groups, clients, pipeline int, noSync bool) {
	nodes := startGroupsCluster(b, 3, groups, false, func(cfg *Config) { cfg.Logger = slog.New(slog.DiscardHandler); cfg.NoSync = noSync })
	// Each node leads one group: hand groups over from the first.
	for g := 1; g < groups; g++ {
		to := nodes[g]
		l := leaderOfGroup(b, nodes, g)
		if l != to {
			l.Group(g).transferTo(raftID(to), raftAddrOf(to))
		}
		sluicetest.WaitFor(b, 10*time.Second, "the transfer", func() bool { return to.Group(g).IsLeader() })
	}
	leaders := make([]*groupsNode, groups)
	for g := range groups {
		leaders[g] = leaderOfGroup(b, nodes, g)
	}
	var left, errs atomic.Int64
	left.Store(int64(b.N))
	stats0 := make([]ReplicationStats, groups)
	for g, l := range leaders {
		stats0[g] = l.Group(g).ReplicationStats()
	}
	cpu0 := processCPU()
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			g := c % groups
			batch := &engine.Batch{}
			keys := make([][]byte, 256)
			for i := range keys {
				keys[i] = []byte(keyOfGroup(fmt.Sprintf("bench:%d:%d", c, i), g, groups))
			}
			for i := 0; left.Add(-int64(pipeline)) > -int64(pipeline); i++ {
				batch.Reset()
				for j := range pipeline {
					cmd := batch.Add()
					cmd.Op = engine.OpSWCheck
					cmd.Key = keys[(i*pipeline+j)%len(keys)]
					cmd.N = [4]int64{1 << 40, int64(time.Minute), 1}
				}
				leaders[g].Execute(batch, time.Now().UnixNano())
				if r := batch.Replies[0]; r.Kind != engine.ReplyDecision {
					errs.Add(1)
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-us/decision")
	b.ReportMetric(float64(errs.Load()), "failed-pipelines")
	var entries, commands uint64
	for g, l := range leaders {
		st := l.Group(g).ReplicationStats()
		entries += st.Entries - stats0[g].Entries
		commands += st.Commands - stats0[g].Commands
	}
	if entries > 0 {
		b.ReportMetric(float64(commands)/float64(entries), "decisions/entry")
	}
}

func raftID(n *groupsNode) raft.ServerID          { return raft.ServerID(n.ID()) }
func raftAddrOf(n *groupsNode) raft.ServerAddress { return raft.ServerAddress(n.RaftAddr()) }

// processCPU is this process's user + system CPU time in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestGroupsTransactionsRefuseKeyspaceCommands: a transaction runs on one
// group, so a KEYS, SCAN or FLUSHALL queued in it would see or empty that
// group's keys alone. On a node of several groups such a transaction is
// refused whole, and nothing in it runs; one alone still covers every
// group the node leads.
func TestGroupsTransactionsRefuseKeyspaceCommands(t *testing.T) {
	nodes := startGroupsCluster(t, 1, 3, false, nil)
	n := nodes[0]
	var keys []string
	for g := range 3 {
		k := keyOfGroup("tx", g, 3)
		keys = append(keys, k)
		if r := run(n, fwCheck(k, 10, 3)).Replies[0]; r.Kind != engine.ReplyDecision {
			t.Fatalf("FW.CHECK %s: %+v", k, r)
		}
	}
	for _, sub := range []engine.Command{
		{Op: engine.OpFlushAll},
		{Op: engine.OpKeys, Pattern: []byte("*")},
		{Op: engine.OpScan, N: [4]int64{0, 10}},
	} {
		for _, tx := range [][]engine.Command{
			{sub},
			{fwCheck(keys[0], 10, 1), sub},
			{sub, fwCheck(keys[1], 10, 1)},
		} {
			// In a pipeline with a command of another group after it.
			b := run(n, engine.Command{Op: engine.OpExec, Sub: tx}, limitInfo(keys[2]))
			if r := b.Replies[0]; !errors.Is(r.Err, engine.ErrTxKeyspace) {
				t.Fatalf("EXEC of %d commands with op %d: %+v, want %v", len(tx), sub.Op, r, engine.ErrTxKeyspace)
			}
			if r := b.Replies[1]; r.Kind == engine.ReplyError {
				t.Fatalf("the command after the refused EXEC: %+v", r)
			}
		}
	}
	for g, k := range keys {
		r := run(n, limitInfo(k)).Replies[0]
		if count, ok := infoField(r, "count"); !ok || count != 3 {
			t.Fatalf("group %d's key %s after the refused transactions: %+v", g, k, r)
		}
	}
	// Outside a transaction FLUSHALL empties every group this node leads.
	if r := run(n, engine.Command{Op: engine.OpFlushAll}).Replies[0]; r.Kind == engine.ReplyError {
		t.Fatalf("FLUSHALL: %+v", r)
	}
	for g := range 3 {
		if d := dump(n.engines[g]); len(d) != 0 {
			t.Fatalf("group %d after FLUSHALL: %v", g, d)
		}
	}
}
