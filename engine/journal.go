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

// ManyShards tags a record whose commands each name their own shard: the
// changes of one command that held several shards (MSET, RENAME, EXEC),
// kept together so that a crash keeps all of them or none.
const ManyShards = 1<<32 - 2

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
// does when it cannot write its append-only file: nothing was done.
var ErrMisconf = errors.New("errors writing to the append-only file; writes are refused until it succeeds again (see INFO persistence)")

// ErrNotDurable answers a write that was applied but whose record could
// not be written (or, under appendfsync always, fsynced): its outcome is
// unknown to the client, since the change holds in memory and is written
// if the disk recovers before the process stops, and is lost otherwise.
// Never MISCONF, which says nothing was done, nor the command's own reply,
// which would claim the change is kept.
var ErrNotDurable = errors.New("the command ran, but its change could not be written to the append-only file: it holds now and is lost if the server stops before the disk recovers (see INFO persistence)")

// One journal record must stay under the log's record limit (64 MiB,
// persistence.MaxRecordSize), or the log refuses it after the change is
// made: the client would be told NOTDURABLE and a restart would lose the
// change under later records replayed on top. So, while journaling:
//
//   - a command that could journal more than MaxJournaledCommand (its
//     arguments, an EXEC's queue, the record a RENAME moves) is refused
//     before it runs, changing nothing;
//   - a script's write that would take its writes past it fails, as
//     redis.call, with that error; what the script wrote before stays (a
//     script that fails midway keeps its earlier writes, as in Redis);
//   - records of independent commands (a pipeline's part on one shard, a
//     run of held commands) end once they reach JournalSplitAt, between
//     two commands.
//
// So one record is at most JournalSplitAt plus two commands' bound (an
// EXEC's queue, a script inside it): 40 MiB, under the limit with room.
const (
	MaxJournaledCommand = 16 << 20
	JournalSplitAt      = 8 << 20
)

// ErrTooBigToJournal refuses a command whose journal record would pass
// MaxJournaledCommand.
var ErrTooBigToJournal = errors.New("command too large for the append-only file: one command (an MSET, a transaction, a script's writes) may journal at most 16 MiB; split it into smaller ones")

// commandOverhead bounds appendCommand's fixed bytes: op, flags, seven
// uvarint or varint fields of at most 10 bytes, the four numbers.
const commandOverhead = 2 + 10*11

// journalBound is an upper bound on the bytes c adds to a journal record:
// its encoding, and for a RENAME the record it moves (at most a page).
func journalBound(c *Command) int {
	n := commandOverhead + len(c.Key) + len(c.Value) + len(c.ReqID)
	for _, a := range c.Args {
		n += 10 + len(a)
	}
	for i := range c.Sub {
		n += 10 + journalBound(&c.Sub[i])
	}
	if c.Op == OpRename {
		n += 2*commandOverhead + shard.MaxRecord
	}
	return n
}

// Record layout (version 1), one per shard part of a batch:
//
//	version u8 | shard uvarint | seq uvarint | now varint | count uvarint | commands
//
// and for a command that held several shards, shard is ManyShards and
// each command is preceded by its own shard (uvarint; AllShards for a
// FLUSHALL inside a transaction).
//
// seq is the engine's own journal sequence, assigned on the shard owner, so
// a shard's records carry increasing seqs; a snapshot remembers, per shard,
// the last seq it includes, and replay skips what the snapshot already has.
const recordVersion = 1

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
	// Shards is, for a ManyShards record, each command's shard.
	Shards []int
}

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
	into.Shards = into.Shards[:0]
	for i := uint64(0); i < n; i++ {
		if into.Shard == ManyShards {
			into.Shards = append(into.Shards, int(r.uvarint()))
		}
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

// journal records what one shard owner just applied. Called on the owner
// after its commands ran, so records follow the shard's order.
func (j *shardJob) journal(cmds []Command, replies []Reply, idx []int32, now int64) error {
	if j.e.journal == nil || (j.b != nil && j.b.replaying) {
		return nil
	}
	w := &j.jw
	started := false
	for _, i := range idx {
		if !changedState(&cmds[i], &replies[i]) {
			continue
		}
		if started && len(w.buf) >= JournalSplitAt {
			if err := j.appendRecord(w); err != nil {
				return err
			}
			started = false
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
		j.journalFailed = true
		return err
	}
	j.durableSeq = max(j.durableSeq, seq)
	return nil
}

// ObserveJournalSeq makes every record journaled from now on take a seq
// above seq: what a loaded snapshot covers (its positions) or a replayed
// record used. Without it, a process that starts from a snapshot would
// number its records from 1 again, and a replay after its crash would skip
// them as covered by that snapshot.
func (e *Engine) ObserveJournalSeq(seq uint64) {
	for {
		cur := e.journalSeq.Load()
		if seq <= cur || e.journalSeq.CompareAndSwap(cur, seq) {
			return
		}
	}
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
	if d.Shard == ManyShards {
		// Keep the commands of the shards the snapshot does not have yet.
		kept := d.Cmds[:0]
		for i, c := range d.Cmds {
			if covered == nil || !covered(d.Shards[i], d.Seq) {
				kept = append(kept, c)
			}
		}
		d.Cmds = kept
	} else if covered != nil && covered(d.Shard, d.Seq) {
		return d.Now, nil
	}
	e.ObserveJournalSeq(d.Seq)
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

// journal writes what a hold changed as one record: a plain record when
// it all happened on one shard, a ManyShards record otherwise. It returns
// the record's journal seq (0 when nothing changed).
func (x *heldRun) journal() (uint64, error) {
	if len(x.effects) == 0 {
		return 0, nil
	}
	one := x.effects[0].shard
	for _, ef := range x.effects {
		if ef.shard != one {
			one = -1
			break
		}
	}
	var w journalWriter
	if one >= 0 {
		w.begin(one, x.e.journalSeq.Add(1), x.now)
	} else {
		w.begin(ManyShards, x.e.journalSeq.Add(1), x.now)
	}
	for i := range x.effects {
		if one < 0 {
			w.buf = binary.AppendUvarint(w.buf, uint64(x.effects[i].shard))
		}
		w.add(&x.effects[i].cmd)
	}
	x.effects, x.effectBytes = x.effects[:0], 0
	return x.e.journal.Append(w.finish())
}
