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
	job  *shardJob // whose buffers Keep and Items take from (nil: find one)
	key1 [1][]byte
	// hash0 is Keys[0]'s hash, computed when the hold was taken (every
	// path to a script's hold hashes its keys, appendShards), so that the
	// calls on that key do not hash it again.
	hash0 uint64
	// t0 and j0 are Keys[0]'s table and job (nil: no key).
	t0 *shard.Table
	j0 *shardJob
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
	x := r.x
	if r.t0 != nil && sameSlice(c.Key, r.Keys[0]) {
		// The script's own key, its shard found once for the run.
		c.hash = r.hash0
		x.reply = r.j0.apply(r.t0, c, x.now)
		x.changed(r.j0.shard, c, &x.reply)
		return x.reply
	}
	if slots := x.e.cfg.Slots; slots != (SlotRange{}) && !slots.Holds(KeySlot(c.Key)) {
		return errReply(ErrNonLocalKey)
	}
	c.hash = shard.Hash(c.Key)
	if x.tables[x.e.shardOf(c.hash)] == nil {
		// Known scripts touch their declared keys alone, which the hold
		// covers; this would be a bug in a native function.
		return errReply(errScriptStrayKey)
	}
	return x.run(c)
}

// Keep copies b into the batch's memory for a reply's bulk string: valid
// as long as the batch's replies are, with no allocation of its own.
func (r *NativeRun) Keep(b []byte) []byte { return r.home().copyOut(b) }

// Items returns n replies for a reply array's items, in the batch's memory
// like Keep's.
func (r *NativeRun) Items(n int) []Reply {
	j := r.home()
	if len(j.items)+n > cap(j.items) {
		// A new block; the replies already handed out keep the old one.
		j.items = make([]Reply, 0, max(64, 2*cap(j.items), n))
	}
	start := len(j.items)
	j.items = j.items[:start+n]
	items := j.items[start : start+n : start+n]
	clear(items)
	return items
}

func (r *NativeRun) home() *shardJob {
	if r.job == nil {
		for _, j := range r.x.jobs {
			r.job = j // any held shard's job: the batch keeps them all
			break
		}
	}
	return r.job
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
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
	if len(c.Sub) > 0 {
		r.hash0 = c.Sub[0].hash
		s := x.e.shardOf(r.hash0)
		r.t0, r.j0 = x.tables[s], x.jobs[s]
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

// maxKeptItems bounds the reply items a shard job keeps for the next
// batch: a pipeline of many scripts leaves no block that size behind.
const maxKeptItems = 1024

// resetItems empties the job's reply items for the next batch, letting go
// of what the old replies pointed to.
func (j *shardJob) resetItems() {
	if cap(j.items) > maxKeptItems {
		j.items = nil
		return
	}
	clear(j.items)
	j.items = j.items[:0]
}
