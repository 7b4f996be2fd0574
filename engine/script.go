package engine

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/sluicehq/sluice/shard"
)

// Scripts (EVAL). The engine knows no Lua: it holds a script's shards and
// lends them to a ScriptRunner (the server's interpreter), whose
// redis.call comes back through ScriptRun.Exec and runs on the held
// tables like a command inside EXEC. A script runs alone against every key
// it touches:
//
//   - Its declared keys (KEYS) decide the shards it holds, in ascending
//     order, as LIMIT.ALL does.
//   - A key it did not declare, on a shard above every held one, extends
//     the hold (still ascending, so no cycle of waits can form).
//   - A key on a lower shard cannot be taken without risking a deadlock:
//     the script is stopped, what it wrote is rolled back from its undo
//     log, the hold is released, and the script runs again from the start
//     holding every shard. The engine remembers the body, so that script
//     holds every shard from then on, as does one flagged
//     allow-cross-slot-keys and every EXEC that contains a script.
//
// What a script changes is journaled as its effects (the commands it ran
// that changed state), one record with the rest of its hold; a replicated
// log carries the EVAL itself, which every node runs to the same result
// because the script's clock is the batch's now and its random numbers
// restart from one seed.
const (
	// OpEval is EVAL and EVALSHA: Value = the body, Sub = the declared
	// keys (OpScriptKey each), Args = ARGV, N[0] = ScriptWide or 0,
	// Key = the ACL user whose permissions the script's commands are
	// checked against (empty: unrestricted). The user's name rather than
	// the connection travels, so every node of a cluster checks alike.
	OpEval Op = 150
	// OpEvalRO is EVAL_RO, EVALSHA_RO and a script flagged no-writes: a
	// read, which may not call a command that writes.
	OpEvalRO Op = 151
	// OpScriptKey is one declared key of a script.
	OpScriptKey Op = 152
)

// Script flags in an OpEval's N[0].
const (
	// ScriptWide: the script holds every shard from the start
	// (allow-cross-slot-keys).
	ScriptWide = 1
	// ScriptOwnKeys: the script touches only its declared keys (a known
	// text, checked by the server), so when they are on one shard it runs
	// on that shard's owner in pipeline order like any single-shard
	// command, with no hold to take.
	ScriptOwnKeys = 2
)

func scriptOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpEval:      {Name: "eval", Writes: true, Creates: true, Keys: KeysHeld, coordinated: true, applyHeld: (*heldRun).eval},
		OpEvalRO:    {Name: "eval_ro", Keys: KeysHeld, coordinated: true, applyHeld: (*heldRun).eval},
		OpScriptKey: {Name: "script-key", Keys: KeysOne, Internal: true},
	}
}

// Errors of scripts.
var (
	// ErrBusy: the command's shard is held by a script that has run past
	// the busy threshold.
	ErrBusy = errors.New("busy running a script")
	// ErrNoScripting: the engine was built without a ScriptRunner.
	ErrNoScripting = errors.New("scripting is not available on this server")
	// ErrScriptReadOnly: a read-only script called a write.
	ErrScriptReadOnly = RawError("ERR Write commands are not allowed from read-only scripts.")
	errScriptStrayKey = RawError("ERR a script marked as touching only its declared keys touched another")
	// errScriptRerun answers the calls of a script that is being stopped
	// to run again with every shard held.
	errScriptRerun = RawError("ERR the script is being restarted with every shard held")
)

// ScriptRunner runs a script's body for the engine. RunScript is called on
// the goroutine holding the script's shards, concurrently for scripts on
// disjoint shards; it returns the script's converted reply.
type ScriptRunner interface {
	RunScript(r *ScriptRun) Reply
}

// ScriptRun is one running script: what it was given, and Exec, through
// which its redis.call reaches the held tables.
type ScriptRun struct {
	Body       []byte
	Keys, Args [][]byte
	Now        int64
	// ReadOnly: EVAL_RO, or flagged no-writes.
	ReadOnly bool
	// Replicated: every node of a replicated log runs this script, so
	// stopping it on one node alone would make them differ.
	Replicated bool
	// User is the command's Key: the ACL user the script runs as, empty
	// when unrestricted.
	User []byte
	// OnStop, set by the runner, stops the interpreter at its next
	// instruction; the engine calls it when the script must start over.
	OnStop func()

	x       *heldRun
	mark    int // len(x.effects) when the script started
	undo    []undoRecord
	saved   map[string]struct{}
	need    []int
	stopped bool
	ownKeys bool      // ScriptOwnKeys: never starts over, so keeps no undo log
	key1    [1][]byte // Keys' array for the common script of one key
	needBig bool      // stopped to start over holding bigOps
	wrote   atomic.Bool
	busy    atomic.Bool
}

// undoRecord is a key's state before a script first wrote it.
type undoRecord struct {
	shard    int
	key      []byte
	hash     uint64
	existed  bool
	kind     shard.Kind
	expireAt int64
	payload  []byte
}

// Wrote reports whether the script has changed state (it may then not be
// killed: SCRIPT KILL answers UNKILLABLE).
func (r *ScriptRun) Wrote() bool { return r.wrote.Load() }

// Stopped reports whether the run was stopped to start over with more
// shards held: its writes were undone and it runs again from the start.
func (r *ScriptRun) Stopped() bool { return r.stopped }

// Replaying reports whether the run is a journal's replay at start-up,
// which redoes old commands (Redis counts no statistics while loading).
func (r *ScriptRun) Replaying() bool { return r.x != nil && r.x.b != nil && r.x.b.replaying }

// SetBusy marks the script as running past the busy threshold (or no
// longer): commands for its shards are then refused with ErrBusy rather
// than queued behind it. Safe from any goroutine.
func (r *ScriptRun) SetBusy(on bool) {
	if r.busy.Swap(on) == on {
		return
	}
	if on {
		r.x.e.busyScripts.Add(1)
	} else {
		r.x.e.busyScripts.Add(-1)
	}
}

// Exec runs one command of the script (redis.call) on the held shards and
// returns its reply. c and its slices must stay valid until the script's
// hold ends: a change is journaled from them.
func (r *ScriptRun) Exec(c *Command) Reply {
	x := r.x
	if r.stopped {
		return errReply(errScriptRerun)
	}
	spec := c.Op.spec()
	if spec.Writes && r.ReadOnly {
		return errReply(ErrScriptReadOnly)
	}
	if spec.Internal || spec.coordinated || spec.Name == "" {
		return errReply(errUnknownOp)
	}
	if slots := x.e.cfg.Slots; slots != (SlotRange{}) {
		// KEYS, SCAN and FLUSHALL would reach the other groups' keys too,
		// and see or empty this group's alone.
		local := spec.Keys != KeysAll
		c.EachKey(func(k []byte) { local = local && slots.Holds(KeySlot(k)) })
		if !local {
			return errReply(ErrNonLocalKey)
		}
	}
	r.need = x.e.appendShards(r.need[:0], c)
	if !r.holds(r.need) && !r.extend(r.need) {
		r.stop()
		return errReply(errScriptRerun)
	}
	if c.Op == OpFlushAll && !x.bigLocked {
		// Emptying the key space must not interleave with a snapshot's
		// copies. Waiting for bigOps while holding shards could deadlock
		// with a snapshot waiting for them: the script starts over with
		// bigOps taken first when a snapshot has it.
		if x.h == nil || !x.e.bigOps.TryLock() {
			r.needBig = true
			r.stop()
			return errReply(errScriptRerun)
		}
		x.bigLocked = true
	}
	if spec.Writes && x.journaling() && x.effectBytes-x.cmdMark+journalBound(c) > MaxJournaledCommand {
		// Its record, with what the command wrote so far, would pass
		// the log's limit: refused before it runs (see JournalSplitAt).
		return errReply(ErrTooBigToJournal)
	}
	if spec.Writes {
		// As Redis: calling a write makes the script unkillable, whether
		// or not it changes anything.
		r.wrote.Store(true)
		if len(x.tables) < len(x.e.shards) && !r.ownKeys {
			r.save(c)
		}
	}
	var rep Reply
	if spec.Keys == KeysAll {
		rep = x.keySpace(c)
	} else {
		rep = x.apply(c)
	}
	return rep
}

func (r *ScriptRun) holds(shards []int) bool {
	for _, s := range shards {
		if r.x.tables[s] == nil {
			return false
		}
	}
	return true
}

// extend adds the shards the script reached that it does not hold, when
// all of them are above every shard it holds; otherwise it reports false.
func (r *ScriptRun) extend(need []int) bool {
	x := r.x
	if x.h == nil {
		return false
	}
	top := -1
	for s := range x.tables {
		top = max(top, s)
	}
	var more []int
	for _, s := range need {
		if x.tables[s] == nil {
			if s < top {
				return false
			}
			more = append(more, s)
		}
	}
	slices.Sort(more)
	x.e.holdMore(x.h, more)
	for _, s := range more {
		if x.b == nil || (!x.b.replaying && !x.b.Replicated) {
			x.e.clocks[s].now = max(x.e.clocks[s].now, x.now)
		}
		x.jobs[s] = &shardJob{e: x.e, b: x.b, shard: s}
		x.e.holders[s].Store(r)
	}
	return true
}

// save records, before the script's first write to each key, the key's
// state, so that a script that must start over can be rolled back. Not
// needed once every shard is held: nothing can stop the script then.
func (r *ScriptRun) save(c *Command) {
	if len(c.Sub) == 0 {
		r.saveKey(c.Key, c.hash)
		return
	}
	for i := range c.Sub {
		r.saveKey(c.Sub[i].Key, c.Sub[i].hash)
	}
}

func (r *ScriptRun) saveKey(key []byte, h uint64) {
	if r.saved == nil {
		r.saved = map[string]struct{}{}
	}
	if _, ok := r.saved[string(key)]; ok {
		return
	}
	r.saved[string(key)] = struct{}{}
	s := r.x.e.shardOf(h)
	t := r.x.tables[s]
	u := undoRecord{shard: s, key: slices.Clone(key), hash: h}
	if e, ok := t.Get(key, h, r.x.now); ok {
		u.existed, u.kind, u.expireAt, u.payload = true, e.Kind, t.ExpireAt(e), slices.Clone(e.Payload)
	}
	r.undo = append(r.undo, u)
}

// stop ends the script so it can run again with every shard held: its
// interpreter stops, its writes are undone, its effects dropped.
func (r *ScriptRun) stop() {
	r.stopped = true
	if r.OnStop != nil {
		r.OnStop()
	}
	x := r.x
	for i := len(r.undo) - 1; i >= 0; i-- {
		u := &r.undo[i]
		t := x.tables[u.shard]
		if e, ok := t.Get(u.key, u.hash, x.now); ok {
			t.Delete(e)
		}
		if u.existed {
			e, err := t.Insert(u.key, u.hash, u.kind, u.expireAt, len(u.payload))
			if err != nil {
				x.e.log.Error("rolling back a script failed; a key may keep its new value", "key", string(u.key), "err", err)
				continue
			}
			copy(e.Payload, u.payload)
		}
		x.e.touched(u.shard, u.key)
	}
	x.effects = x.effects[:r.mark]
	x.effectBytes = 0
	for i := range x.effects {
		x.effectBytes += journalBound(&x.effects[i].cmd)
	}
}

// eval runs a script on the held shards.
func (x *heldRun) eval(c *Command) Reply {
	runner := x.e.cfg.Scripts
	if runner == nil {
		return errReply(ErrNoScripting)
	}
	if c.N[NativeAt] > 0 {
		if rep, ok := x.native(c); ok {
			return rep
		}
	}
	r := &ScriptRun{Body: c.Value, Args: c.Args, Now: x.now, ReadOnly: c.Op == OpEvalRO,
		Replicated: x.b != nil && x.b.Replicated, User: c.Key, x: x, mark: len(x.effects),
		ownKeys: c.N[0]&ScriptOwnKeys != 0}
	r.Keys = r.key1[:0]
	if len(c.Sub) > len(r.key1) {
		r.Keys = make([][]byte, 0, len(c.Sub))
	}
	r.Keys = r.Keys[:len(c.Sub)]
	for i := range c.Sub {
		r.Keys[i] = c.Sub[i].Key
	}
	for s := range x.tables {
		x.e.holders[s].Store(r)
	}
	reply := runner.RunScript(r)
	r.SetBusy(false)
	for s := range x.tables {
		x.e.holders[s].CompareAndSwap(r, nil)
	}
	if r.stopped {
		x.e.wideScripts.Store(xxhash.Sum64(c.Value), struct{}{})
		x.rerun, x.rerunBig = true, r.needBig
		return Reply{}
	}
	return reply
}

// wideScript reports whether a script holds every shard from the start:
// flagged allow-cross-slot-keys, or seen reaching below its hold before.
func (e *Engine) wideScript(c *Command) bool {
	switch {
	case c.N[0]&ScriptWide != 0:
		return true
	case c.N[0]&ScriptOwnKeys != 0:
		return false // never reaches past its keys: no need to hash it
	}
	_, wide := e.wideScripts.Load(xxhash.Sum64(c.Value))
	return wide
}

// hasScript reports whether an EXEC's commands include a script.
func hasScript(cmds []Command) bool {
	return slices.ContainsFunc(cmds, func(c Command) bool { return c.Op.spec().coordinated })
}

// busyFor reports whether c needs a shard a busy script holds.
func (e *Engine) busyFor(c *Command) bool {
	var buf [8]int
	for _, s := range e.appendShards(buf[:0], c) {
		if r := e.holders[s].Load(); r != nil && r.busy.Load() {
			return true
		}
	}
	return false
}

// scriptState is the engine's part of scripting, embedded in Engine.
type scriptState struct {
	// holders[s] is the script holding shard s, if any: BUSY's source.
	holders []atomic.Pointer[ScriptRun]
	// busyScripts counts scripts past the busy threshold, so Execute
	// looks at holders only while there is one.
	busyScripts atomic.Int32
	// wideScripts are the bodies (by hash) that reached below their hold
	// once: they hold every shard from then on.
	wideScripts sync.Map
}
