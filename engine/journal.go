package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/shard"
)

// Journal receives every state-changing command, in each shard's order, so
// that replaying the records through the engine rebuilds the same state.
// persistence.Durable provides it in standalone mode; cluster mode needs
// none (the Raft log is the journal).
type Journal interface {
	// Append stores one record and returns its sequence number, which
	// Batch.JournalSeq reports. Called on shard owners: it must not block
	// on the disk.
	Append(rec []byte) (seq uint64, err error)
	// Err is non-nil while the journal cannot persist records; writes are
	// then refused with ErrMisconf.
	Err() error
}

// AllShards tags a journal record that covers every shard (FLUSHALL).
const AllShards = 1<<32 - 1

// Positions holds, per shard of the engine that wrote a snapshot, the last
// journal seq the snapshot includes.
type Positions []uint64

// Covers reports whether a snapshot with these positions already includes
// the journal record (shard, seq).
func (p Positions) Covers(shardIdx int, seq uint64) bool {
	if shardIdx == AllShards {
		for _, pos := range p {
			if seq > pos {
				return false
			}
		}
		return len(p) > 0
	}
	return shardIdx < len(p) && seq <= p[shardIdx]
}

// ErrMisconf refuses writes while the journal cannot persist them, as Redis
// does when it cannot write its append-only file.
var ErrMisconf = errors.New("errors writing to the append-only file; writes are refused until it succeeds again (see INFO persistence)")

// Record layout (version 1), one per shard part of a batch:
//
//	version u8 | shard uvarint | seq uvarint | now varint | count uvarint | commands
//
// seq is the engine's own journal sequence, assigned on the shard owner, so
// a shard's records carry increasing seqs; a snapshot remembers, per shard,
// the last seq it includes, and replay skips what the snapshot already has.
const recordVersion = 1

func appendCommand(buf []byte, c *Command) []byte {
	buf = append(buf, byte(c.Op), byte(c.Multi))
	buf = binary.AppendUvarint(buf, uint64(c.Flags))
	buf = binary.AppendUvarint(buf, uint64(len(c.Key)))
	buf = append(buf, c.Key...)
	buf = binary.AppendUvarint(buf, uint64(len(c.Value)))
	buf = append(buf, c.Value...)
	for _, n := range c.N {
		buf = binary.AppendVarint(buf, n)
	}
	// Sub-commands (LIMIT.ALL, multi-key DEL): one level deep.
	buf = binary.AppendUvarint(buf, uint64(len(c.Sub)))
	for i := range c.Sub {
		buf = appendCommand(buf, &c.Sub[i])
	}
	return buf
}

// EncodeCommands appends a self-delimiting encoding of cmds to buf: the
// format cluster mode replicates, and the journal's body.
func EncodeCommands(buf []byte, cmds []Command) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(cmds)))
	for i := range cmds {
		buf = appendCommand(buf, &cmds[i])
	}
	return buf
}

// DecodeCommands parses what EncodeCommands wrote, appending to into.
// Commands alias b. Only state-changing operations are accepted.
func DecodeCommands(b []byte, into []Command) ([]Command, []byte, error) {
	r := reader{b: b}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(b)) {
		return into, nil, errBadRecord
	}
	for i := uint64(0); i < n; i++ {
		c, err := r.command(0)
		if err != nil {
			return into, nil, err
		}
		into = append(into, c)
	}
	return into, r.b, nil
}

func (r *reader) command(depth int) (Command, error) {
	var c Command
	c.Op = Op(r.byte())
	c.Multi = MultiKind(r.byte())
	c.Flags = Flags(r.uvarint())
	c.Key = r.bytes()
	c.Value = r.bytes()
	for k := range c.N {
		c.N[k] = r.varint()
	}
	subs := r.uvarint()
	if r.err != nil || subs > uint64(len(r.b)) || (subs > 0 && depth > 0) {
		return c, errBadRecord
	}
	for i := uint64(0); i < subs; i++ {
		sub, err := r.command(depth + 1)
		if err != nil {
			return c, err
		}
		c.Sub = append(c.Sub, sub)
	}
	// Only writes travel; sub-commands only under a multi-key write or
	// LIMIT.ALL, and never nested.
	spec := c.Op.spec()
	switch {
	case !spec.Writes:
		return c, fmt.Errorf("%w: op %d does not write", errBadRecord, c.Op)
	case spec.Keys == KeysLimits && len(c.Sub) == 0:
		return c, fmt.Errorf("%w: LIMIT.ALL without limits", errBadRecord)
	case len(c.Sub) > 0 && spec.Keys != KeysOne && spec.Keys != KeysLimits:
		return c, fmt.Errorf("%w: op %d has sub-commands", errBadRecord, c.Op)
	}
	for i := range c.Sub {
		if sub := c.Sub[i].Op.spec(); spec.Keys == KeysLimits && !sub.Decision || spec.Keys == KeysOne && c.Sub[i].Op != c.Op {
			return c, fmt.Errorf("%w: op %d under op %d", errBadRecord, c.Sub[i].Op, c.Op)
		}
	}
	return c, nil
}

// journalWriter accumulates one shard part's mutating commands.
type journalWriter struct {
	buf       []byte
	count     int
	headerLen int // where the commands start; the count goes there
}

func (w *journalWriter) begin(shardIdx int, seq uint64, now int64) {
	w.buf = append(w.buf[:0], recordVersion)
	w.buf = binary.AppendUvarint(w.buf, uint64(shardIdx))
	w.buf = binary.AppendUvarint(w.buf, seq)
	w.buf = binary.AppendVarint(w.buf, now)
	w.count = 0
	w.headerLen = len(w.buf)
}

func (w *journalWriter) add(c *Command) {
	w.buf = appendCommand(w.buf, c)
	w.count++
}

// finish puts the count after the header. Commands are appended first and
// the count spliced in, so the common case needs one pass.
func (w *journalWriter) finish() []byte {
	headerLen := w.headerLen
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(tmp[:], uint64(w.count))
	w.buf = append(w.buf, tmp[:n]...)
	copy(w.buf[headerLen+n:], w.buf[headerLen:len(w.buf)-n])
	copy(w.buf[headerLen:], tmp[:n])
	return w.buf
}

// DecodedRecord is one journal record.
type DecodedRecord struct {
	Shard int
	Seq   uint64
	Now   int64
	Cmds  []Command
}

var errBadRecord = errors.New("malformed journal record")

// DecodeRecord parses a journal record. Commands alias rec.
func DecodeRecord(rec []byte, into *DecodedRecord) error {
	r := reader{b: rec}
	if v := r.byte(); v != recordVersion {
		return fmt.Errorf("%w: version %d", errBadRecord, v)
	}
	into.Shard = int(r.uvarint())
	into.Seq = r.uvarint()
	into.Now = r.varint()
	n := r.uvarint()
	if r.err != nil || n > uint64(len(rec)) {
		return errBadRecord
	}
	into.Cmds = into.Cmds[:0]
	for i := uint64(0); i < n; i++ {
		c, err := r.command(0)
		if err != nil {
			return err
		}
		// A record holds one shard's part: single-key writes, or a
		// FLUSHALL; multi-key commands are journaled key by key.
		if len(c.Sub) > 0 {
			return fmt.Errorf("%w: op %d with sub-commands in a journal record", errBadRecord, c.Op)
		}
		into.Cmds = append(into.Cmds, c)
	}
	if r.err != nil || len(r.b) != 0 {
		return errBadRecord
	}
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errBadRecord
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadRecord
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// journal records what one shard owner just applied. Called on the owner
// after its commands ran, so records follow the shard's order.
func (j *shardJob) journal(cmds []Command, replies []Reply, idx []int32, now int64) error {
	if j.e.journal == nil || (j.b != nil && j.b.replaying) {
		return nil
	}
	w := &j.jw
	started := false
	for _, i := range idx {
		if changed := cmds[i].Op.spec().changed; changed == nil || !changed(&cmds[i], &replies[i]) {
			continue
		}
		if !started {
			w.begin(j.shard, j.e.journalSeq.Add(1), now)
			started = true
		}
		w.add(&cmds[i])
	}
	if !started {
		return nil
	}
	return j.appendRecord(w)
}

func (j *shardJob) appendRecord(w *journalWriter) error {
	seq, err := j.e.journal.Append(w.finish())
	if err != nil {
		return err
	}
	j.durableSeq = max(j.durableSeq, seq)
	return nil
}

// snapshotTask copies one shard's table, on its owner, together with the
// last journal seq the copy includes.
type snapshotTask struct {
	e     *Engine
	seq   uint64
	clone *shard.Table // in: the previous clone to reuse, or nil; out: the copy
	done  chan struct{}
}

func (s *snapshotTask) Run(t *shard.Table) {
	// Every record this shard journaled so far has a seq <= this value,
	// because this shard's records are only appended on this goroutine.
	s.seq = s.e.journalSeq.Load()
	s.clone = t.CloneInto(s.clone)
	close(s.done)
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

// Each calls fn for every live record of the shard snapshot. The slices
// are valid during the call.
func (s *ShardSnapshot) Each(fn func(SnapshotRecord) error) error {
	var err error
	s.table.ForEach(s.now, func(e shard.Entry, exp int64) bool {
		err = fn(SnapshotRecord{Kind: uint8(e.Kind), ExpireAt: exp, Key: e.Key, Payload: e.Payload})
		return err == nil
	})
	return err
}

// Snapshot copies every shard's state, one shard at a time: each owner
// pauses only for its own copy, never the whole key space at once. Records
// that have expired as of now are left out when the copies are read. Each
// copy's Seq tells replay which journal records it already includes.
// Cluster mode passes the last applied time, not the local clock: entries
// already proposed but not yet applied must still find the keys that are
// live at their own now.
func (e *Engine) Snapshot(now int64) []ShardSnapshot {
	e.bigOps.Lock()
	defer e.bigOps.Unlock()
	out := make([]ShardSnapshot, len(e.shards))
	if len(e.clones) != len(e.shards) {
		e.clones = make([]*shard.Table, len(e.shards))
	}
	for i, s := range e.shards {
		// The previous snapshot's copies are reused: their memory is
		// already mapped, so each owner pauses for a memmove only.
		task := &snapshotTask{e: e, clone: e.clones[i], done: make(chan struct{})}
		s.Submit(task)
		<-task.done
		e.clones[i] = task.clone
		out[i] = ShardSnapshot{Shard: i, Seq: task.seq, Count: task.clone.Len(), now: now, table: task.clone}
	}
	return out
}

// reserveTask sizes one shard's index ahead of a restore.
type reserveTask struct {
	n    int
	done chan struct{}
}

func (r *reserveTask) Run(t *shard.Table) {
	t.Reserve(r.n)
	close(r.done)
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

func (r *restoreTask) Run(t *shard.Table) {
	defer close(r.done)
	for _, rec := range r.recs {
		e, err := t.Insert(rec.Key, shard.Hash(rec.Key), shard.Kind(rec.Kind), rec.ExpireAt, len(rec.Payload))
		if err != nil {
			r.err = err
			return
		}
		copy(e.Payload, rec.Payload)
	}
}

// Restore loads snapshot records (routed by the current shard count, which
// may differ from the one that wrote them). Keys are copied.
func (e *Engine) Restore(recs []SnapshotRecord) error {
	per := make([][]SnapshotRecord, len(e.shards))
	for _, rec := range recs {
		if rec.Kind <= uint8(shard.KindDead) || rec.Kind > uint8(shard.KindFixedWindow) {
			return fmt.Errorf("%w: record kind %d", errBadRecord, rec.Kind)
		}
		s := e.shardOf(shard.Hash(rec.Key))
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

// Replay applies one journal record through the normal engine path at the
// record's own now, which it returns, skipping it when the snapshot already
// includes it (covered(shard, seq) reports that). Replay bypasses
// maxmemory: the state existed before the restart.
func (e *Engine) Replay(rec []byte, covered func(shard int, seq uint64) bool) (now int64, err error) {
	var d DecodedRecord
	if err := DecodeRecord(rec, &d); err != nil {
		return 0, err
	}
	if covered != nil && covered(d.Shard, d.Seq) {
		return d.Now, nil
	}
	for {
		cur := e.journalSeq.Load()
		if d.Seq <= cur || e.journalSeq.CompareAndSwap(cur, d.Seq) {
			break
		}
	}
	b := &Batch{replaying: true}
	b.Cmds = d.Cmds
	e.Execute(b, d.Now)
	for i := range b.Replies {
		if r := &b.Replies[i]; r.Kind == ReplyError && !errors.Is(r.Err, ErrWrongType) {
			return d.Now, fmt.Errorf("replaying %v: %w", d.Cmds[i].Op, r.Err)
		}
	}
	return d.Now, nil
}
