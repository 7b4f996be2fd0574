package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/sluicehq/sluice/shard"
)

// errInternal answers a command whose execution hit a bug.
var errInternal = errors.New("internal error while executing the command; it was logged")

// apply runs one single-key command against the shard's table, through its
// op's row of the op table, and counts decisions. A panic is a bug, but it
// must not take down a server that others depend on: the command gets an
// error and the panic is logged.
func (j *shardJob) apply(t *shard.Table, c *Command, now int64) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			j.e.log.Error("panic while applying a command", "op", c.Op.String(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r = errReply(errInternal)
		}
	}()
	spec := c.Op.spec()
	if spec.apply == nil {
		return errReply(errUnknownOp)
	}
	j.unchanged = false
	if len(c.ReqID) > 0 && !j.dryRun && (spec.once || spec.costAt > 0 && spec.Decision && c.N[spec.costAt-1] > 0) {
		r = j.decideOnce(t, c, now, spec)
		if r.unchanged {
			return r // the first reply again; nothing ran
		}
	} else {
		r = spec.apply(j, t, c, now)
	}
	r.unchanged = j.unchanged
	if spec.Writes && j.e.watches != nil && !j.dryRun {
		// A copy, declared here: passing &r itself to the op's function
		// would move every reply to the heap.
		reply := r
		if changedState(c, &reply) {
			j.e.touched(j.shard, c.Key)
		}
	}
	// A dry run (LIMIT.ALL's first phase) decides nothing yet, and a peek
	// (cost 0) is a read, not a decision.
	if spec.Decision && !j.dryRun && (r.Kind == ReplyDecision || r.Kind == ReplyReservation) && !spec.peek(c) {
		if r.Dec.Limited {
			j.limited++
		} else {
			j.allowed++
		}
	}
	if spec.Decision && !j.dryRun && r.Kind != ReplyError && !j.e.hotOff.Load() && !spec.peek(c) {
		j.recordHot(c, r.Dec.Limited, now)
	}
	return r
}

func isLimiter(k shard.Kind) bool {
	return k >= shard.KindGCRA && k <= shard.KindFixedWindow || k == shard.KindLeakyBucket || k == shard.KindConcurrency
}

// KindName is what TYPE reports for a record kind.
func KindName(k shard.Kind) string {
	switch k {
	case shard.KindString:
		return "string"
	case shard.KindGCRA:
		return "gcra"
	case shard.KindSlidingWindow:
		return "sliding-window"
	case shard.KindSlidingLog:
		return "sliding-log"
	case shard.KindFixedWindow:
		return "fixed-window"
	case shard.KindHash:
		return "hash"
	case shard.KindList:
		return "list"
	case shard.KindSet:
		return "set"
	case shard.KindLeakyBucket:
		return "leaky-bucket"
	case shard.KindConcurrency:
		return "concurrency"
	case shard.KindZSet:
		return "zset"
	}
	return "none"
}

// Limiter records keep their absolute reset timestamp in the record's
// expiry, so an expired limiter is absent to every read, and only the
// parameters and counters in the payload. Layouts (little-endian int64s):
//
//	gcra:           emission interval, max_burst            (TAT = expiry)
//	sliding-window: window, limit, cur, prev                 (start derived from expiry)
//	fixed-window:   window, limit, count                     (start = expiry - window)
//	sliding-log:    window, limit, total, head, count, then a ring of (at, n) (see slRing)
const (
	gcraPayload   = 16
	swPayload     = 32
	fwPayload     = 24
	slEntryLength = 16
)

func getI(b []byte, i int) int64    { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
func putI(b []byte, i int, v int64) { binary.LittleEndian.PutUint64(b[8*i:], uint64(v)) }

// lookup finds the live record for c's key and checks its kind. ok is
// false when there is no live state; e may then still hold an expired
// record of the same kind, which the caller overwrites in place instead of
// deleting it and inserting anew (limiters with short periods expire and
// come back constantly).
func lookup(t *shard.Table, c *Command, now int64, kind shard.Kind) (e shard.Entry, ok bool, err error) {
	e, found, live := t.Lookup(c.Key, c.hash, now)
	switch {
	case !found:
		return shard.Entry{}, false, nil
	case !live && e.Kind != kind:
		t.Delete(e)
		return shard.Entry{}, false, nil
	case !live:
		return e, false, nil
	case e.Kind != kind:
		return e, false, ErrWrongType
	}
	return e, true, nil
}

// create inserts a new record unless memory is past maxmemory: live state
// is never evicted, so new state is what gets refused.
func (j *shardJob) create(t *shard.Table, c *Command, kind shard.Kind, expireAt int64, payload int) (shard.Entry, error) {
	// LIMIT.ALL's commit phase was already cleared by its dry run; failing
	// now would apply the limits in part.
	if !j.committing && (j.b == nil || !j.b.replaying) && j.e.overMemory() {
		return shard.Entry{}, ErrOOM
	}
	return t.Insert(c.Key, c.hash, kind, expireAt, payload)
}

// dryRunCreate reports, in a dry run, the error creating state would meet.
func (j *shardJob) dryRunCreate(creates bool) error {
	if j.dryRun && creates && j.e.overMemory() {
		return ErrOOM
	}
	return nil
}
