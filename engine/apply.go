package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// errInternal answers a command whose execution hit a bug.
var errInternal = errors.New("internal error while executing the command; it was logged")

// apply runs one single-key command against the shard's table. A panic is
// a bug, but it must not take down a server that others depend on: the
// command gets an error and the panic is logged.
func (j *shardJob) apply(t *shard.Table, c *Command, now int64) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			j.e.log.Error("panic while applying a command", "op", int(c.Op), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r = errReply(errInternal)
		}
	}()
	return j.applyCommand(t, c, now)
}

func (j *shardJob) applyCommand(t *shard.Table, c *Command, now int64) Reply {
	switch c.Op {
	case OpThrottle:
		return j.throttle(t, c, now)
	case OpSWCheck:
		return j.slidingWindow(t, c, now)
	case OpSLCheck:
		return j.slidingLog(t, c, now)
	case OpFWCheck:
		return j.fixedWindow(t, c, now)
	case OpRefund:
		return j.refund(t, c, now)
	case OpInfo:
		return j.info(t, c, now)
	case OpGet:
		return j.get(t, c, now)
	case OpSet:
		return j.set(t, c, now)
	case OpIncrBy:
		return j.incrBy(t, c, now)
	case OpDel:
		e, ok := t.Get(c.Key, c.hash, now)
		if ok && (c.Flags&FlagReset == 0 || isLimiter(e.Kind)) {
			t.Delete(e)
			return intReply(1)
		}
		return intReply(0)
	case OpExists:
		if _, ok := t.Get(c.Key, c.hash, now); ok {
			return intReply(1)
		}
		return intReply(0)
	case OpType:
		e, ok := t.Get(c.Key, c.hash, now)
		if !ok {
			return Reply{Kind: ReplyStatus, Str: "none"}
		}
		return Reply{Kind: ReplyStatus, Str: KindName(e.Kind)}
	case OpTTL:
		return j.ttl(t, c, now)
	case OpExpire:
		return j.expire(t, c, now)
	case OpPersist:
		e, ok := t.Get(c.Key, c.hash, now)
		if !ok || t.ExpireAt(e) == 0 {
			return intReply(0)
		}
		if isLimiter(e.Kind) {
			return errReply(ErrLimiterExpiry)
		}
		t.SetExpireAt(e, 0)
		return intReply(1)
	}
	return errReply(errUnknownOp)
}

func isLimiter(k shard.Kind) bool { return k >= shard.KindGCRA }

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
	}
	return "none"
}

func (j *shardJob) get(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	return bulkReply(j.copyOut(e.Payload))
}

func (j *shardJob) set(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if (c.Flags&FlagNX != 0 && ok) || (c.Flags&FlagXX != 0 && !ok) {
		if c.Flags&FlagGet != 0 {
			return j.oldValue(e, ok)
		}
		return nilReply()
	}
	old := nilReply()
	if c.Flags&FlagGet != 0 {
		if old = j.oldValue(e, ok); old.Kind == ReplyError {
			return old
		}
	}
	exp := int64(0)
	switch {
	case c.Flags&FlagKeepTTL != 0 && ok:
		exp = t.ExpireAt(e)
	case c.Flags&FlagRelative != 0:
		exp = now + c.N[0]
	case c.N[0] != 0:
		exp = c.N[0]
	}
	if exp != 0 && exp <= now {
		// Redis: SET with an expiry already past deletes the key.
		if ok {
			t.Delete(e)
		}
		if c.Flags&FlagGet != 0 {
			return old
		}
		return okReply()
	}
	var err error
	if ok && e.Kind == shard.KindString {
		e, err = t.Resize(e, len(c.Value))
		if err == nil {
			t.SetExpireAt(e, exp)
		}
	} else if ok {
		e, err = t.Insert(c.Key, c.hash, shard.KindString, exp, len(c.Value))
	} else {
		e, err = j.create(t, c, shard.KindString, exp, len(c.Value))
	}
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, c.Value)
	if c.Flags&FlagGet != 0 {
		return old
	}
	return okReply()
}

func (j *shardJob) oldValue(e shard.Entry, ok bool) Reply {
	if !ok {
		return nilReply()
	}
	if e.Kind != shard.KindString {
		return errReply(ErrWrongType)
	}
	return bulkReply(j.copyOut(e.Payload))
}

func (j *shardJob) incrBy(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	var cur int64
	if ok {
		if cur, err = ParseInt64(e.Payload); err != nil {
			return errReply(ErrNotInteger)
		}
	}
	d := c.N[0]
	if (d > 0 && cur > 1<<63-1-d) || (d < 0 && cur < -1<<63-d) {
		return errReply(ErrOverflow)
	}
	cur += d
	var digits [20]byte
	v := strconv.AppendInt(digits[:0], cur, 10)
	if ok {
		e, err = t.Resize(e, len(v))
	} else {
		e, err = j.create(t, c, shard.KindString, 0, len(v))
	}
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, v)
	return intReply(cur)
}

// resetAfter is a limiter's remaining time to full, or a string's TTL.
func (j *shardJob) ttl(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return intReply(-2)
	}
	exp := t.ExpireAt(e)
	if exp == 0 {
		return intReply(-1)
	}
	left := exp - now
	millis := c.N[0] == 1
	if isLimiter(e.Kind) {
		// A limiter's TTL is its reset_after, rounded as decisions round it.
		if millis {
			return intReply(MillisRoundedUp(left))
		}
		return intReply(SecondsRoundedUp(left))
	}
	ms := MillisRoundedUp(left)
	if millis {
		return intReply(ms)
	}
	return intReply((ms + 500) / 1000)
}

func (j *shardJob) expire(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return intReply(0)
	}
	if isLimiter(e.Kind) {
		return errReply(ErrLimiterExpiry)
	}
	at := c.N[0]
	if c.Flags&FlagRelative != 0 {
		at = now + c.N[0]
	}
	cur := t.ExpireAt(e)
	switch {
	case c.Flags&FlagNX != 0 && cur != 0,
		c.Flags&FlagXX != 0 && cur == 0,
		c.Flags&FlagGT != 0 && (cur == 0 || at <= cur),
		c.Flags&FlagLT != 0 && cur != 0 && at >= cur:
		return intReply(0)
	}
	if at <= now {
		t.Delete(e)
		return intReply(1)
	}
	t.SetExpireAt(e, at)
	return intReply(1)
}

// refund gives units back to a live limiter and replies its remaining; a
// missing key stays missing (nil reply).
func (j *shardJob) refund(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return nilReply()
	}
	amount := c.N[0]
	switch e.Kind {
	case shard.KindGCRA:
		p := gcraParams(e)
		tat, live := ratelimit.GCRARefund(t.ExpireAt(e), p, amount, now)
		if !live {
			t.Delete(e)
			return intReply(ratelimit.GCRARemaining(0, false, p, now))
		}
		t.SetExpireAt(e, tat)
		return intReply(ratelimit.GCRARemaining(tat, true, p, now))
	case shard.KindSlidingWindow:
		s, p := swState(t, e)
		s, resetAt, live := ratelimit.SWRefund(s, p, amount, now)
		if !live {
			t.Delete(e)
			return intReply(p.Limit)
		}
		t.SetExpireAt(e, resetAt)
		putI(e.Payload, 2, s.Cur)
		putI(e.Payload, 3, s.Prev)
		return intReply(ratelimit.SWRemaining(s, true, p, now))
	case shard.KindFixedWindow:
		s, p := fwState(t, e)
		s, live := ratelimit.FWRefund(s, amount)
		if !live {
			t.Delete(e)
			return intReply(p.Limit)
		}
		putI(e.Payload, 2, s.Count)
		return intReply(ratelimit.FWRemaining(s, true, p, now))
	case shard.KindSlidingLog:
		entries, p := j.slEntries(e)
		expired, _, _, _ := ratelimit.SLDecide(entries, p, 0, now)
		entries = ratelimit.SLRefund(entries[expired:], amount)
		if len(entries) == 0 {
			t.Delete(e)
			return intReply(p.Limit)
		}
		e, err := storeLog(t, e, p, entries)
		if err != nil {
			return errReply(err)
		}
		_, _, resetAt, _ := ratelimit.SLDecide(entries, p, 0, now)
		t.SetExpireAt(e, resetAt)
		return intReply(ratelimit.SLRemaining(entries, p, now))
	}
	return errReply(ErrWrongType)
}

// info describes a live limiter as field/value pairs.
func (j *shardJob) info(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return nilReply()
	}
	resetAt := t.ExpireAt(e)
	var items []Reply
	field := func(name string, v Reply) { items = append(items, strReply(name), v) }
	field("family", strReply(KindName(e.Kind)))
	switch e.Kind {
	case shard.KindGCRA:
		p := gcraParams(e)
		field("max_burst", intReply(p.MaxBurst))
		field("limit", intReply(p.Limit()))
		field("emission_interval_ns", intReply(p.Period))
		field("remaining", intReply(ratelimit.GCRARemaining(resetAt, true, p, now)))
	case shard.KindSlidingWindow:
		s, p := swState(t, e)
		field("limit", intReply(p.Limit))
		field("window_ms", intReply(p.Window/1e6))
		field("remaining", intReply(ratelimit.SWRemaining(s, true, p, now)))
		field("current", intReply(s.Cur))
		field("previous", intReply(s.Prev))
	case shard.KindFixedWindow:
		s, p := fwState(t, e)
		field("limit", intReply(p.Limit))
		field("window_ms", intReply(p.Window/1e6))
		field("remaining", intReply(ratelimit.FWRemaining(s, true, p, now)))
		field("count", intReply(s.Count))
	case shard.KindSlidingLog:
		entries, p := j.slEntries(e)
		expired, _, _, _ := ratelimit.SLDecide(entries, p, 0, now)
		field("limit", intReply(p.Limit))
		field("window_ms", intReply(p.Window/1e6))
		field("remaining", intReply(ratelimit.SLRemaining(entries, p, now)))
		field("entries", intReply(int64(len(entries)-expired)))
	default:
		return errReply(ErrWrongType)
	}
	field("reset_at_ms", intReply(MillisRoundedUp(resetAt)))
	field("reset_after_ms", intReply(MillisRoundedUp(resetAt-now)))
	return Reply{Kind: ReplyMap, Items: items}
}
