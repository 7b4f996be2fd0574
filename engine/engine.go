// Package engine is Sluice's deterministic state machine: the rate-limit
// algorithms (over package ratelimit) and the Redis-subset data types,
// computed as reply = f(stored state, command, now). It reads no clock,
// file or timer: now comes with every batch. It routes keys to shards by
// hash and runs each shard's part of a batch on that shard's owner
// goroutine, so no table is ever shared. Durability (persistence) and
// replication wrap it from outside. Engine methods are safe for concurrent
// use; a Batch is not.
package engine

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// Shards is the number of shards, rounded up to a power of two.
	// Default: the smallest power of two >= 4 x GOMAXPROCS.
	Shards int
	// MaxMemory in bytes; 0 means no limit. Past it, commands that would
	// create state fail with ErrOOM; existing state keeps working.
	MaxMemory int64
	// SweepBudget bounds the index slots (and moved records) one sweep of
	// one shard looks at. Default 1024.
	SweepBudget int
	// SweepEveryBatch sweeps a shard after every batch part it runs. It
	// exists for tests proving that sweeping never changes an answer.
	SweepEveryBatch bool
	// Logger; nil discards.
	Logger *slog.Logger
	// Scripts runs EVAL's scripts; nil refuses them (ErrNoScripting).
	Scripts ScriptRunner
	// HotKeysOff starts with hot-key tracking off (hotkeys.go);
	// SetHotKeysTracking changes it.
	HotKeysOff bool
	// Slots, when set, are the hash slots this engine holds (one Raft
	// group's share of a cluster): a script that reaches for a key outside
	// them fails with ErrNonLocalKey rather than read or write a copy
	// that belongs to another group. Default: every slot.
	Slots SlotRange
}

// Engine routes commands to shards and runs the algorithms.
type Engine struct {
	cfg    Config
	shards []*shard.Shard
	stats  []shardStats
	clocks []shardClock
	sweeps []sweepTask
	mask   uint64
	log    *slog.Logger
	// natives runs known scripts natively (native.go); nil: none.
	natives NativeScripts

	maxMemory atomic.Int64
	closing   atomic.Bool

	journal    Journal
	journalSeq atomic.Uint64
	// bigOps keeps FLUSHALL out of a snapshot in progress, so a FLUSHALL
	// record is either wholly before or wholly after every shard's copy.
	// It also guards clones, the last snapshot's per-shard copies, kept so
	// the next snapshot copies into memory that is already mapped.
	bigOps sync.Mutex
	clones []*shard.Table

	// watches are the shards' WATCH registries (see tx.go), made on the
	// first WATCH.
	watches   []watchers
	watchInit sync.Once

	scriptState
	hotTracking
}

// shardClock is the latest now a shard's commands ran at. Only the shard's
// owner, or the coordinator holding it, touches it.
type shardClock struct {
	now int64
	_   [56]byte
}

// shardNow is the time shard s runs batch b at: never earlier than what
// it ran before. Connections stamp their pipelines as they arrive, so two
// can reach a shard in the other order; without this a key set to expire
// in 1000 ms could be read back with 1001 left. A replayed or replicated
// batch runs at its own time exactly (the time its record carries, the
// same on every node and for any shard count) and leaves the clocks alone.
func (e *Engine) shardNow(s int, b *Batch) int64 {
	now := b.now
	if b.replaying || b.Replicated {
		return now
	}
	c := &e.clocks[s]
	if now < c.now {
		return c.now
	}
	c.now = now
	return now
}

// raiseClock moves shard s's clock to now, on its owner, when a sweep or
// a snapshot copy acts as of now: a pipeline stamped earlier but reaching
// the shard after it must not find a key the sweep freed (or the copy
// left out) still live, or the journal's replay, which runs each record
// at its own time, would rebuild another state than the live one.
func (e *Engine) raiseClock(s int, now int64) {
	if c := &e.clocks[s]; c.now < now {
		c.now = now
	}
}

// shardStats are written by one shard's owner and read by INFO; padded so
// two owners never share a cache line.
type shardStats struct {
	allowed     atomic.Int64
	limited     atomic.Int64
	swept       atomic.Int64
	receiptHits atomic.Int64 // retries answered from a receipt (REQID)
	// CONC.ACQUIREs granted (new leases and renewals by ID) and refused.
	leasesAcquired, leasesRefused atomic.Int64
	_                             [16]byte
}

// Stats are engine counters for INFO.
type Stats struct {
	Allowed, Limited, Swept int64
	Keys                    int64
	Memory                  int64
	// ReceiptHits counts decisions answered from a receipt: retries with
	// a request id already decided, charged nothing.
	ReceiptHits int64
	// LeasesAcquired and LeasesRefused count CONC.ACQUIREs granted (a new
	// lease, or a held ID's renewal) and refused (the key full).
	LeasesAcquired, LeasesRefused int64
}

// New starts an engine and its shard owners.
func New(cfg Config) *Engine {
	if cfg.Shards <= 0 {
		cfg.Shards = 4 * runtime.GOMAXPROCS(0)
	}
	n := 1
	for n < cfg.Shards {
		n *= 2
	}
	cfg.Shards = n
	if cfg.SweepBudget <= 0 {
		cfg.SweepBudget = 1024
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:     cfg,
		natives: nativesOf(cfg.Scripts),
		shards:  make([]*shard.Shard, n),
		stats:   make([]shardStats, n),
		sweeps:  make([]sweepTask, n),
		mask:    uint64(n - 1),
		log:     log,
	}
	e.holders = make([]atomic.Pointer[ScriptRun], n)
	e.clocks = make([]shardClock, n)
	e.hot = make([]*hotShard, n)
	e.hotOff.Store(cfg.HotKeysOff)
	e.maxMemory.Store(cfg.MaxMemory)
	for i := range e.shards {
		e.shards[i] = shard.New(i)
		e.sweeps[i] = sweepTask{e: e, shard: i}
	}
	return e
}

// Close stops the shard owners after the work already submitted. The
// caller must stop calling Execute and Sweep first.
func (e *Engine) Close() {
	if e.closing.Swap(true) {
		return
	}
	for _, s := range e.shards {
		s.Close()
	}
}

// Shards is the number of shards.
func (e *Engine) Shards() int { return len(e.shards) }

// SetMaxMemory changes the memory limit (CONFIG SET maxmemory).
func (e *Engine) SetMaxMemory(n int64) { e.maxMemory.Store(n) }

// MaxMemory is the memory limit in bytes, 0 for none.
func (e *Engine) MaxMemory() int64 { return e.maxMemory.Load() }

// UsedMemory is the bytes held by every shard's table.
func (e *Engine) UsedMemory() int64 {
	var n int64
	for _, s := range e.shards {
		n += s.MemoryUsage()
	}
	return n
}

// Keys is the number of stored keys, counting expired ones not yet swept
// (as Redis's DBSIZE does).
func (e *Engine) Keys() int64 {
	var n int64
	for _, s := range e.shards {
		n += s.Keys()
	}
	return n
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	var st Stats
	for i := range e.stats {
		st.Allowed += e.stats[i].allowed.Load()
		st.Limited += e.stats[i].limited.Load()
		st.Swept += e.stats[i].swept.Load()
		st.ReceiptHits += e.stats[i].receiptHits.Load()
		st.LeasesAcquired += e.stats[i].leasesAcquired.Load()
		st.LeasesRefused += e.stats[i].leasesRefused.Load()
	}
	st.Keys = e.Keys()
	st.Memory = e.UsedMemory()
	return st
}

// ResetStats zeroes the counters Stats sums (CONFIG RESETSTAT); keys and
// memory are state, not counters, and stay.
func (e *Engine) ResetStats() {
	for i := range e.stats {
		st := &e.stats[i]
		for _, c := range []*atomic.Int64{&st.allowed, &st.limited, &st.swept, &st.receiptHits, &st.leasesAcquired, &st.leasesRefused} {
			c.Store(0)
		}
	}
}

func (e *Engine) shardOf(h uint64) int { return int(h & e.mask) }

// overMemory reports whether creating state must be refused.
func (e *Engine) overMemory() bool {
	limit := e.MaxMemory()
	return limit > 0 && e.UsedMemory() >= limit
}

// SetJournal attaches the journal that receives every state change, after
// recovery has replayed the old one. Call before serving.
func (e *Engine) SetJournal(j Journal) { e.journal = j }

// JournalSeq is the last journal sequence assigned.
func (e *Engine) JournalSeq() uint64 { return e.journalSeq.Load() }

// Execute runs a batch's commands in order at now and fills b.Replies.
// Commands on one shard run in pipeline order on its owner; a command
// spanning shards waits for the commands before it and runs alone on the
// shards it needs. The caller supplies now and keeps it from running
// backwards (the server clock; in a cluster, the applied time).
func (e *Engine) Execute(b *Batch, now int64) {
	if cap(b.Replies) < len(b.Cmds) {
		b.Replies = make([]Reply, len(b.Cmds), cap(b.Cmds))
	}
	b.Replies = b.Replies[:len(b.Cmds)]
	if e.closing.Load() {
		for i := range b.Replies {
			b.Replies[i] = errReply(ErrClosed)
		}
		return
	}
	if len(b.jobs) != len(e.shards) {
		b.jobs = make([]shardJob, len(e.shards))
		for i := range b.jobs {
			b.jobs[i] = shardJob{e: e, b: b, shard: i}
		}
	} else if b.jobs[0].e != e {
		// A connection's batch goes to whichever engine owns its keys'
		// group (replication.Groups): rebind the jobs, keeping their
		// buffers.
		for i := range b.jobs {
			b.jobs[i].e = e
		}
	}
	b.now = now
	b.durable, b.journalFailed = 0, false
	var misconf error
	journaling := e.journal != nil && !b.replaying
	if journaling {
		misconf = e.journal.Err()
	}
	for i := 0; i < len(b.Cmds); i++ {
		c := &b.Cmds[i]
		spec := c.Op.spec()
		switch {
		case misconf != nil && c.Writes():
			b.Replies[i] = errReply(ErrMisconf)
		case journaling && c.Writes() && journalBound(c) > MaxJournaledCommand:
			b.Replies[i] = errReply(ErrTooBigToJournal)
		case e.busyScripts.Load() > 0 && !b.replaying && !b.Replicated && e.busyFor(c):
			b.Replies[i] = errReply(ErrBusy)
		case c.heldShards():
			if s, ok := e.singleShard(c); ok {
				j := &b.jobs[s]
				if len(j.idx) == 0 {
					b.used = append(b.used, s)
				}
				j.idx = append(j.idx, int32(i))
				continue
			}
			// Consecutive multi-key commands share one hold of the
			// shards they need: a pipeline of LIMIT.ALLs pays the
			// hand-offs once, not once per command.
			e.flush(b)
			end := i + 1
			for end < len(b.Cmds) && b.Cmds[end].heldShards() && end-i < 256 {
				end++
			}
			if misconf != nil {
				end = i + 1
			}
			e.executeHeld(b, i, end)
			i = end - 1
		case spec.Keys == KeysAll:
			e.flush(b)
			b.Replies[i] = spec.applyAll(e, c, b.now, b)
		case spec.Keys == KeysOne:
			c.hash = shard.Hash(c.Key)
			s := e.shardOf(c.hash)
			j := &b.jobs[s]
			if len(j.idx) == 0 {
				b.used = append(b.used, s)
			}
			j.idx = append(j.idx, int32(i))
		default:
			b.Replies[i] = errReply(errUnknownOp)
		}
	}
	e.flush(b)
}

// flush sends each shard its part of the current segment and waits for all.
func (e *Engine) flush(b *Batch) {
	if len(b.used) == 0 {
		return
	}
	b.wg.Add(len(b.used))
	// The owners take all but the last part; that one this goroutine runs
	// itself when its shard is idle (a lone command, pipeline 1, is then
	// decided with no hand-off at all).
	last := len(b.used) - 1
	for _, s := range b.used[:last] {
		e.shards[s].Submit(&b.jobs[s])
	}
	if s := b.used[last]; !e.shards[s].TryRun(&b.jobs[s]) {
		e.shards[s].Submit(&b.jobs[s])
	}
	b.wg.Wait()
	for _, s := range b.used {
		j := &b.jobs[s]
		j.idx = j.idx[:0]
		b.durable = max(b.durable, j.durableSeq)
		b.journalFailed = b.journalFailed || j.journalFailed
		j.durableSeq, j.journalFailed = 0, false
	}
	b.used = b.used[:0]
}

// shardJob is one shard's part of a batch segment.
type shardJob struct {
	e     *Engine
	b     *Batch
	shard int
	idx   []int32
	buf   []byte // copies of values for bulk replies
	// items are native scripts' reply arrays (NativeRun.Items), reused
	// as buf is.
	items []Reply
	// scratch holds a collection's new contents while an op builds them.
	scratch []byte
	log     []ratelimit.SLEntry
	// rkey and rval are a receipt's side-table key and encoded reply.
	rkey, rval []byte
	// dryRun decides without writing: LIMIT.ALL's first phase.
	dryRun bool
	// committing is LIMIT.ALL's second phase, already cleared to create.
	committing bool
	// unchanged is set by an op that succeeded without changing state
	// when its reply cannot say so (SET NX on an existing key).
	unchanged bool

	here       *heldRun // runHere's, reused
	jw         journalWriter
	durableSeq uint64 // highest journal seq this job appended
	// journalFailed: a record of this job's could not be appended (its
	// changes hold in memory only).
	journalFailed bool

	allowed, limited int64
	// warmed keeps warm's reads from being optimised away.
	warmed byte
}

// warm reads the records of a pipeline's keys on this shard before any
// runs (shard.Table.Warm): their cache misses overlap.
func (j *shardJob) warm(t *shard.Table) {
	var sum byte
	for _, i := range j.idx {
		c := &j.b.Cmds[i]
		switch spec := c.Op.spec(); {
		case spec.Keys == KeysOne && len(c.Sub) == 0 && len(c.Key) > 0:
			sum += t.Warm(c.Key, c.hash)
		case spec.coordinated && len(c.Sub) > 0:
			// A script on this shard alone: its first key, hashed when
			// it was routed.
			sum += t.Warm(c.Sub[0].Key, c.Sub[0].hash)
		}
	}
	j.warmed = sum
}

// Run applies the job's commands on the shard owner.
func (j *shardJob) Run(t *shard.Table) {
	b := j.b
	now := j.e.shardNow(j.shard, b)
	from := 0 // the commands not journaled yet start at j.idx[from]
	if len(j.idx) > 1 {
		j.warm(t)
	}
	for k, i := range j.idx {
		c := &b.Cmds[i]
		if !c.heldShards() {
			b.Replies[i] = j.apply(t, c, now)
			continue
		}
		// A held command on this shard alone: the commands before it
		// are journaled first, so that records follow the shard's order.
		if err := j.journal(b.Cmds, b.Replies, j.idx[from:k], now); err != nil {
			j.e.log.Error("journal append failed; the applied commands may not survive a restart", "err", err)
		}
		b.Replies[i] = j.runHere(t, c, now)
		from = k + 1
	}
	if err := j.journal(b.Cmds, b.Replies, j.idx[from:], now); err != nil {
		j.e.log.Error("journal append failed; the applied commands may not survive a restart", "err", err)
	}
	st := &j.e.stats[j.shard]
	if j.allowed != 0 {
		st.allowed.Add(j.allowed)
		j.allowed = 0
	}
	if j.limited != 0 {
		st.limited.Add(j.limited)
		j.limited = 0
	}
	if j.e.cfg.SweepEveryBatch {
		st.swept.Add(int64(t.Sweep(now, j.e.cfg.SweepBudget)))
	}
}

// Finished: the batch's waiter may go on once the shard's counts include
// this part.
func (j *shardJob) Finished() { j.b.wg.Done() }

// copyOut copies v into the job's buffer so the reply survives later writes
// to the table in the same batch.
func (j *shardJob) copyOut(v []byte) []byte {
	start := len(j.buf)
	j.buf = append(j.buf, v...)
	return j.buf[start:len(j.buf):len(j.buf)]
}

// sweepTask frees expired records on one shard.
type sweepTask struct {
	e       *Engine
	shard   int
	now     int64
	pending atomic.Bool
}

func (s *sweepTask) Run(t *shard.Table) {
	s.e.raiseClock(s.shard, s.now)
	n := t.Sweep(s.now, s.e.cfg.SweepBudget)
	s.e.stats[s.shard].swept.Add(int64(n))
	s.pending.Store(false)
}

// Sweep asks every shard owner to free, within its budget, the records
// that have expired as of now, and returns without waiting. A shard whose
// previous sweep is still queued behind work is skipped. Sweeping only
// frees memory: an expired record is already absent to every read. Callers
// run it periodically (the server, every SweepInterval; in a cluster, the
// node, at the applied time, so that a follower never frees a key the log
// still treats as live).
func (e *Engine) Sweep(now int64) {
	if e.closing.Load() {
		return
	}
	for i := range e.sweeps {
		task := &e.sweeps[i]
		if task.pending.Swap(true) {
			continue
		}
		task.now = now
		e.shards[i].Submit(task)
	}
}
