package replication

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// testLogger sends log lines to t.Log, so they show only when a test fails,
// and drops lines that arrive after the test ended.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testNode is a Node with its engine and the config to reopen it.
type testNode struct {
	*Node
	eng *engine.Engine
	cfg Config
}

// startNode opens a node over a new engine; t.Cleanup closes both.
func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	eng := engine.New(engine.Config{Shards: 4})
	n, err := Open(cfg, eng)
	if err != nil {
		eng.Close()
		t.Fatalf("open node: %v", err)
	}
	tn := &testNode{Node: n, eng: eng, cfg: cfg}
	t.Cleanup(func() {
		tn.Close()
		eng.Close()
	})
	return tn
}

// restart reopens a closed node from its directory and Raft address, over
// a new, empty engine.
func (tn *testNode) restart(t testing.TB) *testNode {
	t.Helper()
	cfg := tn.cfg
	cfg.ID = tn.ID()
	cfg.RaftAddr = tn.RaftAddr()
	return startNode(t, cfg)
}

type cluster struct {
	t     testing.TB
	nodes []*testNode
	tweak func(*Config)
}

// newCluster starts size nodes on loopback: the first bootstraps the group
// and the others join it through the leader, as --cluster-join will.
func newCluster(t testing.TB, size int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, tweak: tweak}
	first := c.add(true)
	sluicetest.WaitFor(t, 5*time.Second, "first node leads", first.IsLeader)
	for range size - 1 {
		c.join(c.add(false))
	}
	c.waitConverged()
	return c
}

// join makes n a member through whichever node leads. Joining is
// idempotent, so it is tried again, as --cluster-join does, when an
// election on a loaded machine moves leadership during the change
// (outcome unknown, or not the leader any more).
func (c *cluster) join(n *testNode) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		for _, m := range c.live() {
			if m != n && m.IsLeader() {
				if err = m.Join(n.ID(), n.RaftAddr(), n.ClientAddr()); err == nil {
					return
				}
				break
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("join %s: %v", n.ID(), err)
		}
		if err != nil {
			c.t.Logf("join %s, trying again: %v", n.ID()[:8], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var nodeSeq struct {
	mu sync.Mutex
	n  int
}

// add starts one more node (not yet a member unless bootstrap).
func (c *cluster) add(bootstrap bool) *testNode {
	nodeSeq.mu.Lock()
	nodeSeq.n++
	i := nodeSeq.n
	nodeSeq.mu.Unlock()
	cfg := Config{
		Dir:        c.t.TempDir(),
		ClientAddr: fmt.Sprintf("client-%d.test:%d", i, 7000+i),
		Bootstrap:  bootstrap,
		Logger:     testLogger(c.t),
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n := startNode(c.t, cfg)
	c.nodes = append(c.nodes, n)
	return n
}

// live returns the nodes not closed.
func (c *cluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if !n.closed.Load() {
			out = append(out, n)
		}
	}
	return out
}

// leader waits for one live node to lead and every live node to know it.
func (c *cluster) leader() *testNode {
	c.t.Helper()
	var l *testNode
	sluicetest.WaitFor(c.t, 10*time.Second, "a leader known to every live node", func() bool {
		l = nil
		for _, n := range c.live() {
			if n.IsLeader() {
				l = n
			}
		}
		if l == nil {
			return false
		}
		for _, n := range c.live() {
			if _, id := n.raft.LeaderWithID(); string(id) != l.ID() {
				return false
			}
		}
		return true
	})
	return l
}

// waitConverged waits until every live node has applied everything the
// leader has and knows every member's client address.
func (c *cluster) waitConverged() {
	c.t.Helper()
	l := c.leader()
	// A barrier makes the leader apply everything committed before it.
	if err := l.raft.Barrier(5 * time.Second).Error(); err != nil {
		c.t.Fatalf("barrier: %v", err)
	}
	// The FSM's own applied index, not raft.AppliedIndex: raft documents
	// that the latter does not imply the FSM has consumed the entry.
	want := l.AppliedIndex()
	sluicetest.WaitFor(c.t, 10*time.Second, "followers caught up", func() bool {
		for _, n := range c.live() {
			if n.AppliedIndex() < want {
				return false
			}
			for _, m := range l.ClusterView().Nodes {
				if _, ok := n.members.get(m.ID); !ok {
					return false
				}
			}
		}
		return true
	})
}

// Commands.

const hour = int64(time.Hour)

func slCheck(key string, limit, cost int64) engine.Command {
	return engine.Command{Op: engine.OpSLCheck, Key: []byte(key), N: [4]int64{limit, hour, cost}}
}

func fwCheck(key string, limit, cost int64) engine.Command {
	// A window of 10^6 s: the test never crosses a window boundary.
	return engine.Command{Op: engine.OpFWCheck, Key: []byte(key), N: [4]int64{limit, 1e6 * int64(time.Second), cost}}
}

func limitInfo(key string) engine.Command {
	return engine.Command{Op: engine.OpInfo, Key: []byte(key)}
}

// executor is what a node and a bare engine have in common.
type executor interface{ Execute(*engine.Batch, int64) }

// run executes cmds as one pipeline on x, now.
func run(x executor, cmds ...engine.Command) *engine.Batch {
	b := &engine.Batch{Cmds: cmds}
	x.Execute(b, time.Now().UnixNano())
	return b
}

// runReadOnly executes cmds as a pipeline of a READONLY connection.
func runReadOnly(x executor, cmds ...engine.Command) *engine.Batch {
	b := &engine.Batch{Cmds: cmds, ReadOnly: true}
	x.Execute(b, time.Now().UnixNano())
	return b
}

// infoField reads an integer field of a LIMIT.INFO reply; ok is false for
// nil (no live state).
func infoField(r engine.Reply, name string) (int64, bool) {
	if r.Kind != engine.ReplyMap && r.Kind != engine.ReplyArray {
		return 0, false
	}
	for i := 0; i+1 < len(r.Items); i += 2 {
		k := r.Items[i]
		if k.Str == name || string(k.Bulk) == name {
			return r.Items[i+1].Int, true
		}
	}
	return 0, false
}

// dump renders an engine's whole live state, for comparing nodes.
func dump(eng *engine.Engine) map[string]string { return dumpAt(eng, time.Now().UnixNano()) }

// dumpAt renders the state live at now.
func dumpAt(eng *engine.Engine, now int64) map[string]string {
	out := map[string]string{}
	// Unshared: Raft may be writing a snapshot of the same engine.
	for _, s := range eng.SnapshotUnshared(now) {
		_ = s.Each(func(r engine.SnapshotRecord) error {
			out[string(r.Key)] = fmt.Sprintf("%d/%d/%s", r.Kind, r.ExpireAt, hex.EncodeToString(r.Payload))
			return nil
		})
	}
	return out
}

func sameState(t testing.TB, a, b *testNode) {
	t.Helper()
	now := time.Now().UnixNano()
	da, db := dumpAt(a.eng, now), dumpAt(b.eng, now)
	if maps.Equal(da, db) {
		return
	}
	var diff bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(da)) {
		if da[k] != db[k] {
			fmt.Fprintf(&diff, "  %q: %s vs %s\n", k, da[k], db[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(db)) {
		if _, ok := da[k]; !ok {
			fmt.Fprintf(&diff, "  %q: missing vs %s\n", k, db[k])
		}
	}
	t.Fatalf("state of %s (%d keys) differs from %s (%d keys):\n%s", a.ID()[:8], len(da), b.ID()[:8], len(db), diff.String())
}

func isMoved(err error) (*engine.MovedError, bool) {
	var m *engine.MovedError
	ok := errors.As(err, &m)
	return m, ok
}
