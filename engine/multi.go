package engine

import (
	"errors"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/shard"
)

var errUnknownOp = errors.New("unknown operation")

// holdTask lends a shard's table to a coordinator: the owner hands its
// table over and parks until released, so while it waits nobody else
// touches the table and the coordinator has it alone.
type holdTask struct {
	tables   chan<- *shard.Table
	release  <-chan struct{}
	finished *sync.WaitGroup
}

func (h *holdTask) Run(t *shard.Table) {
	h.tables <- t
	<-h.release
}

func (h *holdTask) Finished() { h.finished.Done() }

// held is a set of shards taken in ascending order and released together.
type held struct {
	tables   map[int]*shard.Table
	release  chan struct{}
	finished sync.WaitGroup
}

// hold takes the shards in ascending order, each one only after the one
// before it is held, so two multi-shard commands can never wait on each
// other in a cycle.
func (e *Engine) hold(shards []int) *held {
	h := &held{tables: make(map[int]*shard.Table, len(shards)), release: make(chan struct{})}
	e.holdMore(h, shards)
	return h
}

// holdMore takes shards (sorted, each above every shard h holds) into h.
func (e *Engine) holdMore(h *held, shards []int) {
	tables := make(chan *shard.Table)
	for _, s := range shards {
		h.finished.Add(1)
		e.shards[s].Submit(&holdTask{tables: tables, release: h.release, finished: &h.finished})
		h.tables[s] = <-tables
	}
}

// done releases every shard and waits until each has published its
// counts; the close orders the coordinator's writes before the owners'
// next reads.
func (h *held) done() {
	close(h.release)
	h.finished.Wait()
}

// heldRun is one hold's execution: the held tables, a job per shard, and
// the state changes to journal, as one record, when the hold ends.
type heldRun struct {
	e      *Engine
	b      *Batch
	tables map[int]*shard.Table
	jobs   map[int]*shardJob
	now    int64
	// effects are the changes made, in order, each on its shard: what
	// replay must redo. They alias the batch's commands or engine-built
	// ones, valid until the record is written.
	effects []effect
	// effectBytes bounds the effects' journal record (journalBound);
	// cmdMark is what it was when the current top-level command began.
	effectBytes, cmdMark int
	// h is the hold, which a script may extend; nil on a shard's owner.
	h *held
	// rerun: a script stopped to run again with every shard held (and
	// bigOps, for rerunBig: it empties the key space).
	rerun, rerunBig bool
	// bigLocked: the run holds e.bigOps.
	bigLocked bool
	// reply is run's last reply, where changed reads it: a pointer to a
	// local would move every reply to the heap.
	reply Reply
	// nrun is a native script's run (native.go), reused.
	nrun NativeRun
	// home is, on a shard's owner (runHere), that shard's job.
	home *shardJob
}

type effect struct {
	shard int
	cmd   Command
}

// table and job of key's shard (held).
func (x *heldRun) on(c *Command) (*shard.Table, *shardJob) {
	s := x.e.shardOf(c.hash)
	return x.tables[s], x.jobs[s]
}

// run applies a single-key command on its held shard and records the
// change it made, if any.
func (x *heldRun) run(c *Command) Reply {
	t, j := x.on(c)
	x.reply = j.apply(t, c, x.now)
	x.changed(j.shard, c, &x.reply)
	return x.reply
}

// changed records c as an effect on shard s if its reply says it changed
// state.
func (x *heldRun) changed(s int, c *Command, r *Reply) {
	if changedState(c, r) {
		x.record(s, *c)
	}
}

// record adds an effect to journal.
func (x *heldRun) record(s int, c Command) {
	if x.e.journal == nil || (x.b != nil && x.b.replaying) {
		return
	}
	x.effects = append(x.effects, effect{shard: s, cmd: c})
	x.effectBytes += journalBound(&c)
}

// journaling reports whether the run's changes are journaled.
func (x *heldRun) journaling() bool {
	return x.e.journal != nil && (x.b == nil || !x.b.replaying)
}

// beginCommand starts a top-level command of the run: the record so far
// ends first if it has grown past JournalSplitAt (the commands before are
// independent of this one), so one record never nears the log's limit.
func (x *heldRun) beginCommand() {
	if x.effectBytes >= JournalSplitAt {
		x.flushJournal()
	}
	x.cmdMark = x.effectBytes
}

// flushJournal writes the effects so far as a record.
func (x *heldRun) flushJournal() {
	seq, err := x.journal()
	if err != nil {
		x.e.log.Error("journal append failed; the applied commands may not survive a restart", "err", err)
		if x.b != nil {
			x.b.journalFailed = true
		}
	}
	if x.b != nil {
		x.b.durable = max(x.b.durable, seq)
	}
}

// executeHeld runs b.Cmds[from:to] (multi-key commands, LIMIT.ALLs,
// RENAMEs, EXECs) in order while holding the union of the shards they
// touch, and journals what they changed as one record, so that a crash
// keeps all of it or none.
func (e *Engine) executeHeld(b *Batch, from, to int) {
	var shards []int
	for i := from; i < to; i++ {
		shards = e.appendShards(shards, &b.Cmds[i])
	}
	slices.Sort(shards)
	x := e.holdRun(b, shards, needsBigOps(b.Cmds[from:to]))
	for i := from; i < to; i++ {
		x.beginCommand()
		b.Replies[i] = x.apply(&b.Cmds[i])
		if x.rerun {
			// A script reached below its hold: what ran before it is
			// kept and journaled, and it starts over with every shard.
			big := x.rerunBig
			x.end()
			x = e.holdRun(b, e.allShards(), big)
			b.Replies[i] = x.apply(&b.Cmds[i])
		}
	}
	x.end()
}

// holdRun holds shards (sorted) for a run of b's commands, after taking
// bigOps if big.
func (e *Engine) holdRun(b *Batch, shards []int, big bool) *heldRun {
	if big {
		e.bigOps.Lock()
	}
	h := e.hold(shards)
	// The run's time is the latest any of its shards has run at (see
	// shardNow).
	now := b.now
	if !b.replaying && !b.Replicated {
		for _, s := range shards {
			now = max(now, e.clocks[s].now)
		}
		for _, s := range shards {
			e.clocks[s].now = now
		}
	}
	x := &heldRun{e: e, b: b, tables: h.tables, jobs: make(map[int]*shardJob, len(shards)), now: now, h: h, bigLocked: big}
	for _, s := range shards {
		x.jobs[s] = &shardJob{e: e, b: b, shard: s}
	}
	return x
}

// end journals what the hold changed, publishes its counts and releases
// the shards.
func (x *heldRun) end() {
	x.flushJournal()
	for s, j := range x.jobs {
		x.e.stats[s].allowed.Add(j.allowed)
		x.e.stats[s].limited.Add(j.limited)
	}
	x.h.done()
	if x.bigLocked {
		x.e.bigOps.Unlock()
	}
}

// apply runs one command on the held shards.
func (x *heldRun) apply(c *Command) Reply {
	spec := c.Op.spec()
	switch {
	case spec.applyHeld != nil:
		return spec.applyHeld(x, c)
	case spec.Keys == KeysLimits:
		return x.limitAll(c)
	case spec.Keys == KeysOne && len(c.Sub) > 0:
		return x.multiKey(c)
	case spec.Keys == KeysOne:
		return x.run(c)
	}
	return errReply(errUnknownOp)
}

// singleShard reports the one shard a held command touches, if it touches
// only one: it then runs on that shard's owner like any single-key
// command, in pipeline order, with no hold to take.
func (e *Engine) singleShard(c *Command) (int, bool) {
	if (c.Op.spec().coordinated && c.N[0]&ScriptOwnKeys == 0) || bigOp(c) {
		// A script's hold may grow; emptying the key space takes bigOps.
		return 0, false
	}
	var buf [4]int
	shards := e.appendShards(buf[:0], c)
	if len(shards) != 1 {
		return 0, false
	}
	return shards[0], true
}

// runHere runs a held command whose shards are only j's, on j's owner,
// with t, and journals what it changed.
func (j *shardJob) runHere(t *shard.Table, c *Command, now int64) Reply {
	// The job keeps its one-shard run: a pipeline of scripts on one
	// shard does not build it each time.
	x := j.here
	if x == nil {
		x = &heldRun{tables: map[int]*shard.Table{}, jobs: map[int]*shardJob{}}
		j.here = x
	}
	x.e, x.b, x.now, x.rerun = j.e, j.b, now, false
	if x.tables[j.shard] != t {
		// Set once: a job's run holds its one shard (a lookup costs less
		// than an assignment).
		x.tables[j.shard], x.jobs[j.shard] = t, j
	}
	x.home = j
	x.cmdMark = x.effectBytes
	r := x.apply(c)
	if x.rerun {
		// A script said to touch only its keys reached another shard,
		// which an owner cannot take: stopped, its reply an error. (The
		// server vouches for such scripts; this does not happen.)
		r = errReply(errScriptStrayKey)
	}
	seq, err := x.journal()
	if err != nil {
		j.e.log.Error("journal append failed; the applied commands may not survive a restart", "err", err)
		j.journalFailed = true
	}
	j.durableSeq = max(j.durableSeq, seq)
	return r
}

// appendShards adds the shards c touches to shards: its key's, its
// sub-commands' (recursively, for EXEC), or every shard for a key-space
// command.
func (e *Engine) appendShards(shards []int, c *Command) []int {
	spec := c.Op.spec()
	switch {
	case spec.Keys == KeysAll:
		for s := range e.shards {
			shards = addShard(shards, s)
		}
	case len(c.Sub) > 0 || spec.coordinated:
		// The sub-commands' keys are hashed even when every shard is
		// held: they run on the shards their hashes name.
		for i := range c.Sub {
			shards = e.appendShards(shards, &c.Sub[i])
		}
		if (c.Op == OpExec && hasScript(c.Sub)) || (spec.coordinated && e.wideScript(c)) {
			for s := range e.shards {
				shards = addShard(shards, s)
			}
		}
	default:
		c.hash = shard.Hash(c.Key)
		shards = addShard(shards, e.shardOf(c.hash))
	}
	return shards
}

// addShard adds s to shards unless it is there. (A function, not a
// closure over shards, which would move the list to the heap each call.)
func addShard(shards []int, s int) []int {
	if !slices.Contains(shards, s) {
		shards = append(shards, s)
	}
	return shards
}

// shardsOf hashes the sub-commands' keys and returns the sorted shards they
// touch.
func (e *Engine) shardsOf(subs []Command) []int {
	var shards []int
	for i := range subs {
		shards = e.appendShards(shards, &subs[i])
	}
	slices.Sort(shards)
	return shards
}

func (e *Engine) allShards() []int {
	all := make([]int, len(e.shards))
	for i := range all {
		all[i] = i
	}
	return all
}

// createAllOrNone checks maxmemory once, on the shard of the first key's
// hash, and then lets every held shard create until setCommitting(false): a
// command setting several keys is refused whole, never part way.
func (x *heldRun) createAllOrNone(hash uint64) error {
	if err := x.jobs[x.e.shardOf(hash)].growable(); err != nil {
		return err
	}
	x.setCommitting(true)
	return nil
}

func (x *heldRun) setCommitting(on bool) {
	for _, j := range x.jobs {
		j.committing = on
	}
}

// multiKey runs one single-key sub-command per key (DEL, EXISTS, MGET,
// MSET, LIMIT.RESET) on the held shards, in order.
func (x *heldRun) multiKey(c *Command) Reply {
	if c.Multi == MultiOK && c.Op.spec().Creates {
		// MSET is all or nothing: refused as a whole past maxmemory.
		if err := x.createAllOrNone(c.Sub[0].hash); err != nil {
			return errReply(err)
		}
		defer x.setCommitting(false)
	}
	replies := make([]Reply, len(c.Sub))
	for i := range c.Sub {
		replies[i] = x.run(&c.Sub[i])
	}
	switch c.Multi {
	case MultiArray:
		// MGET answers nil for a key of another type, not WRONGTYPE.
		for i := range replies {
			if replies[i].Kind == ReplyError && errors.Is(replies[i].Err, ErrWrongType) {
				replies[i] = nilReply()
			}
		}
		return Reply{Kind: ReplyArray, Items: replies}
	case MultiOK:
		for _, r := range replies {
			if r.Kind == ReplyError {
				return r
			}
		}
		return okReply()
	}
	var sum int64
	for _, r := range replies {
		if r.Kind == ReplyError {
			return r
		}
		sum += r.Int
	}
	return intReply(sum)
}
