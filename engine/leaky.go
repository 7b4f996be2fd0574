package engine

import (
	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// LB.RESERVE and LB.CANCEL: the leaky bucket as a meter (shaping). The
// record's expiry is the schedule's end, so an idle bucket is no key; the
// payload keeps the parameters, as the caller wrote them (rate, period,
// burst) so that LIMIT.INFO can say them back, in 16 bytes:
//
//	as written:  period ns | 1<<63 | rate<<32 | burst   (rate < 2^31, burst < 2^32)
//	interval:    interval ns | burst                    (top bit clear: a rate or burst too
//	                                                     wide to pack, or written before
//	                                                     they were kept)
//
// The schedule's step is the interval, period/rate rounded down, either way.

// Op numbers of the leaky bucket.
const (
	// LB.RESERVE: N = interval (ns), burst, cost, max wait (ns; -1: none);
	// FlagMS. With FlagAsWritten, N[0] is the period (ns) and N[1] is
	// rate<<32 | burst.
	OpLBReserve Op = 34
	// LB.CANCEL: N[0] = units.
	OpLBCancel Op = 35
)

const (
	lbPayload  = 16
	lbPacked   = 1 << 63
	lbMaxRate  = 1<<31 - 1
	lbMaxBurst = 1<<32 - 1
)

// LBPack is LB.RESERVE's N[0] and N[1] with FlagAsWritten for rate per
// period with burst; ok is false when rate or burst is too wide to pack
// (the command then carries the interval).
func LBPack(rate, period, burst int64) (n0, n1 int64, ok bool) {
	if rate < 1 || rate > lbMaxRate || burst < 0 || burst > lbMaxBurst {
		return 0, 0, false
	}
	return period, rate<<32 | burst, true
}

// lbWritten is what a record or command keeps of the parameters as
// written: rate 0 when only the interval is known.
type lbWritten struct{ rate, period int64 }

// lbCommandParams reads an LB.RESERVE's parameters.
func lbCommandParams(c *Command) (ratelimit.LBParams, lbWritten, error) {
	if c.Flags&FlagAsWritten == 0 {
		return ratelimit.LBParams{Interval: c.N[0], Burst: c.N[1]}, lbWritten{}, nil
	}
	w := lbWritten{rate: c.N[1] >> 32, period: c.N[0]}
	iv, err := ratelimit.LBInterval(w.rate, w.period)
	return ratelimit.LBParams{Interval: iv, Burst: c.N[1] & lbMaxBurst}, w, err
}

// putLB stores the parameters in a record's payload.
func putLB(e shard.Entry, p ratelimit.LBParams, w lbWritten) {
	if w.rate > 0 {
		putI(e.Payload, 0, w.period)
		putI(e.Payload, 1, int64(uint64(lbPacked)|uint64(w.rate)<<32|uint64(p.Burst)))
		return
	}
	putI(e.Payload, 0, p.Interval)
	putI(e.Payload, 1, p.Burst)
}

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
	p, _ := lbRecordParams(e)
	return p
}

// lbRecordParams reads a record's parameters, and its rate and period
// when it keeps them.
func lbRecordParams(e shard.Entry) (ratelimit.LBParams, lbWritten) {
	w0, w1 := getI(e.Payload, 0), uint64(getI(e.Payload, 1))
	if w1&lbPacked == 0 {
		return ratelimit.LBParams{Interval: w0, Burst: int64(w1)}, lbWritten{}
	}
	w := lbWritten{rate: int64(w1>>32) & lbMaxRate, period: w0}
	// Checked when written: the rate is at least 1 and at most the period.
	return ratelimit.LBParams{Interval: w.period / max(w.rate, 1), Burst: int64(w1 & lbMaxBurst)}, w
}

func (j *shardJob) lbReserve(t *shard.Table, c *Command, now int64) Reply {
	p, written, err := lbCommandParams(c)
	if err != nil {
		return errReply(err)
	}
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
		putLB(e, p, written)
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
	p, w := lbRecordParams(e)
	tat := t.ExpireAt(e)
	if w.rate > 0 {
		field("rate", intReply(w.rate))
		field("period", strReply(SecondsText(w.period)))
	}
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
