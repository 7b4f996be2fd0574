package engine

import (
	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// LB.RESERVE and LB.CANCEL: the leaky bucket as a meter (shaping). The
// record's expiry is the schedule's end, so an idle bucket is no key; the
// payload keeps the interval and the burst.

// Op numbers of the leaky bucket.
const (
	// LB.RESERVE: N = interval (ns), burst, cost, max wait (ns; -1: none);
	// FlagMS.
	OpLBReserve Op = 34
	// LB.CANCEL: N[0] = units.
	OpLBCancel Op = 35
)

const lbPayload = 16

func leakyOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpLBReserve: {Name: "lb.reserve", Writes: true, Decision: true, Creates: true, Keys: KeysOne, costAt: 3,
			changed: reserved, apply: (*shardJob).lbReserve},
		OpLBCancel: {Name: "lb.cancel", Writes: true, Keys: KeysOne, changed: nonNil, apply: (*shardJob).lbCancel},
	}
}

// reserved: an admitted reservation of a positive cost moved the schedule.
func reserved(c *Command, r *Reply) bool {
	return r.Kind == ReplyReservation && !r.Dec.Limited && c.N[2] > 0
}

// nonNil: a write answered with something other than nil (no state) or an
// error changed state.
func nonNil(_ *Command, r *Reply) bool { return r.Kind != ReplyNil && r.Kind != ReplyError }

func lbParams(e shard.Entry) ratelimit.LBParams {
	return ratelimit.LBParams{Interval: getI(e.Payload, 0), Burst: getI(e.Payload, 1)}
}

func (j *shardJob) lbReserve(t *shard.Table, c *Command, now int64) Reply {
	p := ratelimit.LBParams{Interval: c.N[0], Burst: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindLeakyBucket)
	if err != nil {
		return errReply(err)
	}
	var tat int64
	if ok {
		tat = t.ExpireAt(e)
	}
	end, write, r, err := ratelimit.LBReserve(tat, ok, p, c.N[2], c.N[3], now)
	if err != nil {
		return errReply(err)
	}
	if err := j.dryRunCreate(write && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if write && !j.dryRun {
		if e.Payload == nil {
			if e, err = j.create(t, c, shard.KindLeakyBucket, end, lbPayload); err != nil {
				return errReply(err)
			}
		} else {
			t.SetExpireAt(e, end)
		}
		putI(e.Payload, 0, p.Interval)
		putI(e.Payload, 1, p.Burst)
	}
	return Reply{Kind: ReplyReservation, MS: c.Flags&FlagMS != 0,
		Dec: ratelimit.Decision{Limited: !r.Admitted, RetryAfter: r.Wait, Remaining: r.Ahead, ResetAfter: r.ResetAfter}}
}

// lbCancel gives back units of a schedule: the units still scheduled
// after it, or nil when the key holds no schedule.
func (j *shardJob) lbCancel(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindLeakyBucket)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	p := lbParams(e)
	tat, live := ratelimit.LBCancel(t.ExpireAt(e), p, c.N[0], now)
	if !live {
		t.Delete(e)
		return intReply(0)
	}
	t.SetExpireAt(e, tat)
	return intReply(ratelimit.LBScheduled(tat, p, now))
}

// lbRefund is LIMIT.REFUND on a schedule: LB.CANCEL, answered with the
// units that could go now without waiting.
func lbRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
	p := lbParams(e)
	tat, live := ratelimit.LBCancel(t.ExpireAt(e), p, amount, now)
	if !live {
		t.Delete(e)
		return intReply(p.Burst)
	}
	t.SetExpireAt(e, tat)
	return intReply(ratelimit.LBRemaining(tat, p, now))
}

func lbInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	p := lbParams(e)
	tat := t.ExpireAt(e)
	field("burst", intReply(p.Burst))
	field("interval_ns", intReply(p.Interval))
	field("scheduled", intReply(ratelimit.LBScheduled(tat, p, now)))
	field("remaining", intReply(ratelimit.LBRemaining(tat, p, now)))
}

// SecondsCeil converts a wait to whole seconds, rounding any remainder up:
// a caller that sleeps the reported time never goes early.
func SecondsCeil(ns int64) int64 {
	s := ns / 1e9
	if ns%1e9 != 0 {
		s++
	}
	return s
}

// ReservationFields are a ReplyReservation's four integers as sent.
func ReservationFields(r *Reply) [4]int64 {
	round := SecondsCeil
	if r.MS {
		round = MillisRoundedUp
	}
	admitted := int64(1)
	if r.Dec.Limited {
		admitted = 0
	}
	return [4]int64{admitted, round(r.Dec.RetryAfter), r.Dec.Remaining, round(r.Dec.ResetAfter)}
}
