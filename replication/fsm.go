package replication

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/persistence"
)

// fsm applies committed entries to the engine. Raft calls Apply, Snapshot
// and Restore from one goroutine; the fields below are touched only there.
type fsm struct {
	n   *Node
	eng *engine.Engine
	log *slog.Logger

	// lastNow is the largest now applied so far: entries are applied at
	// max(entry now, lastNow), so time never runs backwards on any node,
	// even when a new leader's clock is behind the old one's. It is part of
	// the replicated state and of every snapshot.
	lastNow   int64
	lastIndex uint64
	// appliedNow mirrors lastNow for the sweeper and for reads, which run
	// on other goroutines.
	appliedNow atomic.Int64
	// appliedIndex is lastIndex, published after the entry is applied.
	appliedIndex atomic.Uint64
	// gate is the maxmemory state the engine is set to: -1 unknown, 0 open,
	// 1 refusing new state (see flagOverMemory).
	gate  int8
	batch engine.Batch
}

var _ raft.FSM = (*fsm)(nil)

// Apply runs one committed entry. Its result is never needed: replies
// reach the proposing connections directly (see applyBatch).
func (f *fsm) Apply(l *raft.Log) any {
	f.lastIndex = l.Index
	defer f.appliedIndex.Store(l.Index)
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	switch l.Data[0] {
	case entryBatch:
		f.applyBatch(l.Index, l.Data)
	case entryMember:
		m, err := decodeMember(l.Data)
		if err != nil {
			f.log.Error("replication: skipping malformed member entry", "index", l.Index, "err", err)
			return nil
		}
		f.n.members.apply(m)
	case entryState:
		// Every node applies the same change to the same state alike; an
		// error here is the same on every node, and goes back to the
		// proposer through the future's response.
		if st := f.n.cfg.State; st != nil {
			if err := st.Apply(l.Data[1:]); err != nil {
				f.log.Error("replication: state change not applied", "index", l.Index, "err", err)
				return err
			}
		}
	default:
		// Every node running this version skips it alike, so state stays
		// the same everywhere; a newer version's entry kind means the
		// group is mid-upgrade and this node is the old one.
		f.log.Error("replication: skipping raft entry of unknown kind; is this node older than the leader?", "index", l.Index, "kind", l.Data[0])
	}
	return nil
}

// applyBatch runs a batch entry at its (clamped) now. On the node that
// proposed it, while the connections still wait, it runs their own batches
// (reads included, in pipeline order), so replies land in buffers the
// connections own and nothing is copied; everywhere else it runs the
// decoded writes. Reads change nothing, so both give the same state.
func (f *fsm) applyBatch(index uint64, data []byte) {
	h, body, err := decodeBatchHeader(data)
	if err != nil {
		f.log.Error("replication: skipping malformed batch entry", "index", index, "err", err)
		return
	}
	now := max(h.now, f.lastNow)
	f.lastNow = now
	f.appliedNow.Store(now)
	f.n.cfg.Clock.Observe(now)
	f.setGate(h.flags&flagOverMemory != 0)
	if h.origin == f.n.origin {
		if p := f.n.claim(h.seq); p != nil {
			for _, r := range p.reqs {
				r.b.Replicated = true
				f.eng.Execute(r.b, now)
				r.b.Replicated = false
				r.done <- struct{}{}
			}
			return
		}
	}
	b := &f.batch
	b.Reset()
	b.Replicated = true
	var rest []byte
	b.Cmds, rest, err = engine.DecodeCommands(body, b.Cmds)
	if err != nil || len(rest) != 0 {
		f.log.Error("replication: skipping malformed batch entry", "index", index, "err", err, "trailing", len(rest))
		return
	}
	f.eng.Execute(b, now)
}

// setGate makes the engine refuse or allow new state as the leader decided
// for this entry. The engine checks maxmemory against its own memory use,
// which differs between nodes (sweeps run at different moments); letting
// each node decide would let a follower drop a key the leader created.
// So the leader decides once per entry and every node applies its verdict:
// a limit of 1 byte refuses every creation, 0 refuses none.
func (f *fsm) setGate(over bool) {
	g := int8(0)
	if over {
		g = 1
	}
	if g == f.gate {
		return
	}
	f.gate = g
	f.eng.SetMaxMemory(int64(g))
}

// Snapshot takes per-shard copies of the engine's state; the slow part,
// writing them out, happens in Persist while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	// At the applied time, not the local clock: entries already proposed
	// but not yet applied must still find the keys they expect.
	return &fsmSnapshot{
		shards: f.eng.Snapshot(f.lastNow),
		header: persistence.SnapshotHeader{
			LastNow:   f.lastNow,
			LogSeq:    f.lastIndex,
			CreatedAt: time.Now().UnixNano(),
			Meta:      encodeMeta(f.n.members.snapshot(), f.stateSnapshot()),
		},
	}, nil
}

func (f *fsm) stateSnapshot() []byte {
	if st := f.n.cfg.State; st != nil {
		return st.Snapshot()
	}
	return nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	flush := &engine.Batch{Cmds: []engine.Command{{Op: engine.OpFlushAll}}}
	f.eng.Execute(flush, f.lastNow)
	if r := flush.Replies[0]; r.Kind == engine.ReplyError {
		return fmt.Errorf("replication: restore: clearing state: %w", r.Err)
	}
	h, records, err := persistence.LoadSnapshot(rc, f.eng)
	if err != nil {
		return fmt.Errorf("replication: restore snapshot: %w", err)
	}
	m, state, err := decodeMeta(h.Meta)
	if err != nil {
		return fmt.Errorf("replication: restore snapshot members: %w", err)
	}
	f.n.members.replace(m)
	if st := f.n.cfg.State; st != nil && state != nil {
		if err := st.Restore(state); err != nil {
			return fmt.Errorf("replication: restore snapshot state: %w", err)
		}
	}
	f.lastNow = h.LastNow
	f.appliedNow.Store(h.LastNow)
	f.lastIndex = h.LogSeq
	f.appliedIndex.Store(h.LogSeq)
	f.n.cfg.Clock.Observe(h.LastNow)
	f.gate = -1
	f.log.Info("replication: restored snapshot", "records", records, "last_now", h.LastNow)
	return nil
}

// fsmSnapshot is a point-in-time copy of the state, written by Persist.
type fsmSnapshot struct {
	shards []engine.ShardSnapshot
	header persistence.SnapshotHeader
}

// Persist writes the copy in the shared snapshot codec.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("replication: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w io.Writer) error {
	return persistence.WriteSnapshot(w, s.header, s.shards, nil)
}

// Release drops the copy.
func (s *fsmSnapshot) Release() { s.shards = nil }
