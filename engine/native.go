package engine

import (
	"github.com/sluicehq/sluice/shard"
)

// Known scripts run natively. A script the server recognises (a limiter
// library's fixed text, known by its SHA1) and whose arguments it covers
// is marked in its OpEval's N[NativeAt] with the script's id. Where the
// script runs (on its shard's owner, or in a hold for EXEC), the engine
// hands it to NativeScripts instead of the interpreter: Go code that runs
// the script's commands straight on the held table through NativeRun.Do,
// with none of an interpreted run's set-up (no ScriptRun, no interpreter
// state, no command lookup or parse per call, no busy timer).
//
// The id travels in the EVAL itself, so every node of a replicated log and
// every replay takes the path the deciding node took; the native code and
// the interpreter give the same reply and the same state (the server's
// equivalence tests), so even a node whose own acceleration is off agrees.
// The journal keeps a native run's effects, as it does an interpreted
// script's.

// NativeAt is the index in an OpEval's N of the known script's id (0: run
// the body on the interpreter).
const NativeAt = 1

// NativeScripts runs known scripts as Go code. The ScriptRunner given in
// Config.Scripts provides it when it also implements this interface.
type NativeScripts interface {
	// RunNative runs known script id. done is false when the native code
	// gave up (an argument or a stored value it does not cover), having
	// changed nothing: the interpreter then runs the body.
	RunNative(id int64, r *NativeRun) (rep Reply, done bool)
}

// NativeRun is one native run of a known script: its keys, arguments and
// clock, and Do, which runs one of its commands on the held tables.
type NativeRun struct {
	Keys, Args [][]byte
	// Now is the script's clock (the batch's now: the same on every
	// node).
	Now int64
	// ReadOnly: EVAL_RO or EVALSHA_RO, which may not write.
	ReadOnly bool

	x    *heldRun
	job  *shardJob // whose buffer Keep appends to (nil: find one)
	key1 [1][]byte
}

// Replaying reports whether the run redoes a journal at start-up, when
// nothing is counted.
func (r *NativeRun) Replaying() bool { return r.x.b != nil && r.x.b.replaying }

// Do runs one single-key command of the script on the held tables, as the
// script's redis.call would (and journals it when it changes state). c
// and its slices must stay valid until the batch's replies are written.
func (r *NativeRun) Do(c *Command) Reply {
	spec := c.Op.spec()
	switch {
	case spec.Writes && r.ReadOnly:
		return errReply(ErrScriptReadOnly)
	case spec.Keys != KeysOne || len(c.Sub) > 0 || spec.Internal || spec.apply == nil:
		return errReply(errUnknownOp)
	}
	c.hash = shard.Hash(c.Key)
	if r.x.tables[r.x.e.shardOf(c.hash)] == nil {
		// Known scripts touch their declared keys alone, which the hold
		// covers; this would be a bug in a native function.
		return errReply(errScriptStrayKey)
	}
	return r.x.run(c)
}

// Keep copies b into the batch's memory for a reply's bulk string: valid
// as long as the batch's replies are, with no allocation of its own.
func (r *NativeRun) Keep(b []byte) []byte {
	if r.job == nil {
		for _, j := range r.x.jobs {
			r.job = j // any held shard's job: the batch keeps them all
			break
		}
	}
	return r.job.copyOut(b)
}

// native runs c, an OpEval marked with a known script's id, as Go code;
// ok is false when the interpreter must run it instead.
func (x *heldRun) native(c *Command) (Reply, bool) {
	n := x.e.natives
	if n == nil {
		return Reply{}, false
	}
	r := &x.nrun
	*r = NativeRun{Args: c.Args, Now: x.now, ReadOnly: c.Op == OpEvalRO, x: x, job: x.home}
	r.Keys = r.key1[:0]
	if len(c.Sub) > len(r.key1) {
		r.Keys = make([][]byte, 0, len(c.Sub))
	}
	for i := range c.Sub {
		r.Keys = append(r.Keys, c.Sub[i].Key)
	}
	rep, done := n.RunNative(c.N[NativeAt], r)
	r.x = nil
	return rep, done
}

// nativesOf is the script runner's native side, if it has one.
func nativesOf(r ScriptRunner) NativeScripts {
	n, _ := r.(NativeScripts)
	return n
}
