package engine

import (
	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// CL.THROTTLE: GCRA, redis-cell compatible. The record's expiry is the
// theoretical arrival time (TAT), which is also when the bucket is full
// again; the payload keeps the emission interval and max_burst.

func (j *shardJob) throttle(t *shard.Table, c *Command, now int64) Reply {
	p := ratelimit.GCRAParams{MaxBurst: c.N[0], Count: c.N[1], Period: c.N[2]}
	e, ok, err := lookup(t, c, now, shard.KindGCRA)
	if err != nil {
		return errReply(err)
	}
	var tat int64
	if ok {
		tat = t.ExpireAt(e)
	}
	newTAT, write, d := ratelimit.GCRADecide(tat, ok, p, c.N[3], now)
	if err := j.dryRunCreate(write && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if write && !j.dryRun {
		if e.Payload == nil {
			if e, err = j.create(t, c, shard.KindGCRA, newTAT, gcraPayload); err != nil {
				return errReply(err)
			}
		} else {
			t.SetExpireAt(e, newTAT)
		}
		putI(e.Payload, 0, p.EmissionInterval())
		putI(e.Payload, 1, p.MaxBurst)
	}
	return decReply(d, c.Flags)
}

func gcraParams(e shard.Entry) ratelimit.GCRAParams {
	return ratelimit.GCRAParams{MaxBurst: getI(e.Payload, 1), Count: 1, Period: getI(e.Payload, 0)}
}

// gcraRefund moves the TAT back by amount emission intervals; a bucket
// that is full again is deleted.
func gcraRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
	p := gcraParams(e)
	tat, live := ratelimit.GCRARefund(t.ExpireAt(e), p, amount, now)
	if !live {
		t.Delete(e)
		return intReply(ratelimit.GCRARemaining(0, false, p, now))
	}
	t.SetExpireAt(e, tat)
	return intReply(ratelimit.GCRARemaining(tat, true, p, now))
}

func gcraInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	p := gcraParams(e)
	field("max_burst", intReply(p.MaxBurst))
	field("limit", intReply(p.Limit()))
	field("emission_interval_ns", intReply(p.Period))
	field("remaining", intReply(ratelimit.GCRARemaining(t.ExpireAt(e), true, p, now)))
}
