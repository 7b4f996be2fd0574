package engine

import (
	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// FW.CHECK: the fixed window, aligned to the epoch. The payload keeps the
// window, the limit and the count; the record's expiry is the window's end.

func fwState(t *shard.Table, e shard.Entry) (ratelimit.FWState, ratelimit.WindowParams) {
	p := ratelimit.WindowParams{Window: getI(e.Payload, 0), Limit: getI(e.Payload, 1)}
	return ratelimit.FWState{Start: t.ExpireAt(e) - p.Window, Count: getI(e.Payload, 2)}, p
}

func (j *shardJob) fixedWindow(t *shard.Table, c *Command, now int64) Reply {
	p := ratelimit.WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindFixedWindow)
	if err != nil {
		return errReply(err)
	}
	var s ratelimit.FWState
	if ok {
		var stored ratelimit.WindowParams
		s, stored = fwState(t, e)
		ok = stored.Window == p.Window
	}
	next, resetAt, write, d := ratelimit.FWDecide(s, ok, p, c.N[2], now)
	if err := j.dryRunCreate(write && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if write && !j.dryRun {
		if e.Payload == nil {
			if e, err = j.create(t, c, shard.KindFixedWindow, resetAt, fwPayload); err != nil {
				return errReply(err)
			}
		} else {
			t.SetExpireAt(e, resetAt)
		}
		putI(e.Payload, 0, p.Window)
		putI(e.Payload, 1, p.Limit)
		putI(e.Payload, 2, next.Count)
	}
	return decReply(d, c.Flags)
}

func fwRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
	s, p := fwState(t, e)
	s, live := ratelimit.FWRefund(s, amount)
	if !live {
		t.Delete(e)
		return intReply(p.Limit)
	}
	putI(e.Payload, 2, s.Count)
	return intReply(ratelimit.FWRemaining(s, true, p, now))
}

func fwInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	s, p := fwState(t, e)
	field("limit", intReply(p.Limit))
	field("window", strReply(SecondsText(p.Window)))
	field("window_ms", intReply(p.Window/1e6))
	field("remaining", intReply(ratelimit.FWRemaining(s, true, p, now)))
	field("count", intReply(s.Count))
}
