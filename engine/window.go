package engine

import (
	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// SW.CHECK: the sliding window counter. The payload keeps the window, the
// limit and the current and previous windows' counts; the record's expiry is
// when the estimate reaches zero.

func swState(t *shard.Table, e shard.Entry) (ratelimit.SWState, ratelimit.WindowParams) {
	p := ratelimit.WindowParams{Window: getI(e.Payload, 0), Limit: getI(e.Payload, 1)}
	s := ratelimit.SWState{Cur: getI(e.Payload, 2), Prev: getI(e.Payload, 3)}
	// The stored reset time is when the estimate reaches zero: the end of
	// the next window while the current one has counts, else the end of
	// the current one. The window start follows from it.
	if s.Cur > 0 {
		s.Start = t.ExpireAt(e) - 2*p.Window
	} else {
		s.Start = t.ExpireAt(e) - p.Window
	}
	return s, p
}

func (j *shardJob) slidingWindow(t *shard.Table, c *Command, now int64) Reply {
	p := ratelimit.WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindSlidingWindow)
	if err != nil {
		return errReply(err)
	}
	var s ratelimit.SWState
	if ok {
		var stored ratelimit.WindowParams
		s, stored = swState(t, e)
		// Counts taken over windows of another length mean nothing under
		// this one: a changed window starts the limiter afresh.
		ok = stored.Window == p.Window
	}
	next, resetAt, write, d := ratelimit.SWDecide(s, ok, p, c.N[2], now)
	if err := j.dryRunCreate(write && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if write && !j.dryRun {
		if e.Payload == nil {
			if e, err = j.create(t, c, shard.KindSlidingWindow, resetAt, swPayload); err != nil {
				return errReply(err)
			}
		} else {
			t.SetExpireAt(e, resetAt)
		}
		putI(e.Payload, 0, p.Window)
		putI(e.Payload, 1, p.Limit)
		putI(e.Payload, 2, next.Cur)
		putI(e.Payload, 3, next.Prev)
	}
	return decReply(d, c.Flags)
}

func swRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
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
}

func swInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	s, p := swState(t, e)
	field("limit", intReply(p.Limit))
	field("window", strReply(SecondsText(p.Window)))
	field("window_ms", intReply(p.Window/1e6))
	field("remaining", intReply(ratelimit.SWRemaining(s, true, p, now)))
	field("current", intReply(s.Cur))
	field("previous", intReply(s.Prev))
}
