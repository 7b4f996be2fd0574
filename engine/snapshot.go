package engine

import (
	"fmt"

	"github.com/sluicehq/sluice/shard"
)

// Snapshots of engine state: per-shard copies taken on the owners, and
// restore. The file and stream formats are persistence's.

// snapshotTask copies one shard's table, on its owner, together with the
// last journal seq the copy includes.
type snapshotTask struct {
	e     *Engine
	shard int
	now   int64 // the records expired as of now are left out of the copy
	seq   uint64
	clone *shard.Table // in: the previous clone to reuse, or nil; out: the copy
	done  chan struct{}
}

func (s *snapshotTask) Run(t *shard.Table) {
	// Every record this shard journaled so far has a seq <= this value,
	// because this shard's records are only appended on this goroutine.
	s.seq = s.e.journalSeq.Load()
	s.e.raiseClock(s.shard, s.now)
	s.clone = t.CloneInto(s.clone)
	close(s.done)
}

func (r *reserveTask) Run(t *shard.Table) {
	t.Reserve(r.n)
	close(r.done)
}

func (r *restoreTask) Run(t *shard.Table) {
	defer close(r.done)
	for _, rec := range r.recs {
		into := t
		if shard.Kind(rec.Kind) == shard.KindReceipt {
			into = t.Side(true)
		}
		e, err := into.Insert(rec.Key, shard.Hash(rec.Key), shard.Kind(rec.Kind), rec.ExpireAt, len(rec.Payload))
		if err != nil {
			r.err = err
			return
		}
		copy(e.Payload, rec.Payload)
	}
}

// SnapshotRecord is one stored key as a snapshot carries it.
type SnapshotRecord struct {
	Kind     uint8
	ExpireAt int64
	Key      []byte
	Payload  []byte
}

// ShardSnapshot is one shard's records at journal position Seq.
type ShardSnapshot struct {
	Shard int
	Seq   uint64
	Count int // records in the copy, possibly including expired ones
	now   int64
	table *shard.Table
}

// Each calls fn for every live record of the shard snapshot, the keys'
// and then the receipts' (kind shard.KindReceipt). The slices are valid
// during the call.
func (s *ShardSnapshot) Each(fn func(SnapshotRecord) error) error {
	var err error
	each := func(e shard.Entry, exp int64) bool {
		err = fn(SnapshotRecord{Kind: uint8(e.Kind), ExpireAt: exp, Key: e.Key, Payload: e.Payload})
		return err == nil
	}
	s.table.ForEach(s.now, each)
	if side := s.table.Side(false); side != nil && err == nil {
		side.ForEach(s.now, each)
	}
	return err
}

// Snapshot copies every shard's state, one shard at a time: each owner
// pauses only for its own copy, never the whole key space at once. Records
// that have expired as of now are left out when the copies are read. Each
// copy's Seq tells replay which journal records it already includes.
// Cluster mode passes the last applied time, not the local clock: entries
// already proposed but not yet applied must still find the keys that are
// live at their own now.
//
// The copies are the previous snapshot's memory again, so a snapshot must
// be done with (its writer finished) before the next is taken: one writer
// at a time. A caller that may overlap the writer (a test comparing states
// while Raft snapshots in the background) takes SnapshotUnshared.
func (e *Engine) Snapshot(now int64) []ShardSnapshot { return e.snapshot(now, true) }

// SnapshotUnshared is Snapshot into fresh memory, never reused: it may
// overlap any other snapshot, at the cost of page faults on the copy.
func (e *Engine) SnapshotUnshared(now int64) []ShardSnapshot { return e.snapshot(now, false) }

func (e *Engine) snapshot(now int64, reuse bool) []ShardSnapshot {
	e.bigOps.Lock()
	defer e.bigOps.Unlock()
	out := make([]ShardSnapshot, len(e.shards))
	if len(e.clones) != len(e.shards) {
		e.clones = make([]*shard.Table, len(e.shards))
	}
	for i, s := range e.shards {
		// The previous snapshot's copies are reused: their memory is
		// already mapped, so each owner pauses for a memmove only.
		task := &snapshotTask{e: e, shard: i, now: now, done: make(chan struct{})}
		if reuse {
			task.clone = e.clones[i]
		}
		s.Submit(task)
		<-task.done
		if reuse {
			e.clones[i] = task.clone
		}
		count := task.clone.Len()
		if side := task.clone.Side(false); side != nil {
			count += side.Len()
		}
		out[i] = ShardSnapshot{Shard: i, Seq: task.seq, Count: count, now: now, table: task.clone}
	}
	return out
}

// reserveTask sizes one shard's index ahead of a restore.
type reserveTask struct {
	n    int
	done chan struct{}
}

// Reserve sizes every shard's index for a restore of total keys.
func (e *Engine) Reserve(total int) {
	per := total/len(e.shards) + total/len(e.shards)/8 + 64 // hashing is not perfectly even
	tasks := make([]*reserveTask, len(e.shards))
	for i, s := range e.shards {
		tasks[i] = &reserveTask{n: per, done: make(chan struct{})}
		s.Submit(tasks[i])
	}
	for _, t := range tasks {
		<-t.done
	}
}

// restoreTask inserts snapshot records into one shard's table.
type restoreTask struct {
	recs []SnapshotRecord
	err  error
	done chan struct{}
}

// Restore loads snapshot records (routed by the current shard count, which
// may differ from the one that wrote them). Keys are copied.
func (e *Engine) Restore(recs []SnapshotRecord) error {
	per := make([][]SnapshotRecord, len(e.shards))
	for _, rec := range recs {
		owner := rec.Key
		switch {
		case shard.Kind(rec.Kind) == shard.KindReceipt:
			var ok bool
			if owner, ok = receiptOwner(rec.Key); !ok {
				return fmt.Errorf("%w: receipt without its key", errBadRecord)
			}
		case rec.Kind <= uint8(shard.KindDead) || rec.Kind > uint8(shard.KindLast):
			return fmt.Errorf("%w: record kind %d", errBadRecord, rec.Kind)
		}
		s := e.shardOf(shard.Hash(owner))
		per[s] = append(per[s], rec)
	}
	tasks := make([]*restoreTask, len(e.shards))
	for i, recs := range per {
		if len(recs) == 0 {
			continue
		}
		tasks[i] = &restoreTask{recs: recs, done: make(chan struct{})}
		e.shards[i].Submit(tasks[i])
	}
	for _, t := range tasks {
		if t != nil {
			<-t.done
			if t.err != nil {
				return t.err
			}
		}
	}
	return nil
}
