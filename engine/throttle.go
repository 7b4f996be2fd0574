package engine

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// CL.THROTTLE: GCRA, redis-cell compatible. The record's expiry is the
// theoretical arrival time (TAT), which is also when the bucket is full
// again; the payload keeps the parameters as the caller wrote them
// (max_burst, count, period), so that LIMIT.INFO can say them back, in 16
// bytes whenever they fit, since a limiter's size is what a million keys
// cost:
//
//	packed (16 bytes):  period ns | 1<<63 | count<<32 | max_burst    (count < 2^31, max_burst < 2^32)
//	wide (24 bytes):    period ns | max_burst | count
//	legacy (16 bytes):  emission interval ns | max_burst             (top bit clear: written before
//	                                                                  count and period were kept)
//
// A decision rewrites the payload from its own parameters, so a legacy
// record lasts until its key's next decision.
const (
	gcraPacked    = 1 << 63
	gcraMaxCount  = 1<<31 - 1
	gcraMaxBurst  = 1<<32 - 1
	gcraWide      = 24
	gcraCountMask = gcraMaxCount << 32
)

// gcraPayloadLen is the payload p needs.
func gcraPayloadLen(p ratelimit.GCRAParams) int {
	if p.Count <= gcraMaxCount && p.MaxBurst <= gcraMaxBurst {
		return gcraPayload
	}
	return gcraWide
}

// putGCRA stores p in e's payload, resizing it when p needs the other
// layout (rare: a count or a max_burst past the packed bounds).
func putGCRA(t *shard.Table, e shard.Entry, p ratelimit.GCRAParams) (shard.Entry, error) {
	if n := gcraPayloadLen(p); len(e.Payload) != n {
		var err error
		if e, err = t.Resize(e, n); err != nil {
			return e, err
		}
	}
	putI(e.Payload, 0, p.Period)
	if len(e.Payload) == gcraWide {
		putI(e.Payload, 1, p.MaxBurst)
		putI(e.Payload, 2, p.Count)
	} else {
		putI(e.Payload, 1, int64(uint64(gcraPacked)|uint64(p.Count)<<32|uint64(p.MaxBurst)))
	}
	return e, nil
}

// gcraParams reads a record's parameters; written is false for a legacy
// record, whose count and period are not known (Count 1, Period the
// emission interval: the same schedule).
func gcraParams(e shard.Entry) (p ratelimit.GCRAParams, written bool) {
	w0, w1 := getI(e.Payload, 0), uint64(getI(e.Payload, 1))
	switch {
	case len(e.Payload) >= gcraWide:
		return ratelimit.GCRAParams{Period: w0, MaxBurst: int64(w1), Count: getI(e.Payload, 2)}, true
	case w1&gcraPacked != 0:
		return ratelimit.GCRAParams{Period: w0, MaxBurst: int64(w1 & gcraMaxBurst), Count: int64(w1&gcraCountMask) >> 32}, true
	}
	return ratelimit.GCRAParams{Period: w0, MaxBurst: int64(w1), Count: 1}, false
}

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
			if e, err = j.create(t, c, shard.KindGCRA, newTAT, gcraPayloadLen(p)); err != nil {
				return errReply(err)
			}
		} else {
			t.SetExpireAt(e, newTAT)
		}
		if e, err = putGCRA(t, e, p); err != nil {
			return errReply(err)
		}
	}
	return decReply(d, c.Flags)
}

// gcraRefund moves the TAT back by amount emission intervals; a bucket
// that is full again is deleted.
func gcraRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
	p, _ := gcraParams(e)
	tat, live := ratelimit.GCRARefund(t.ExpireAt(e), p, amount, now)
	if !live {
		t.Delete(e)
		return intReply(ratelimit.GCRARemaining(0, false, p, now))
	}
	t.SetExpireAt(e, tat)
	return intReply(ratelimit.GCRARemaining(tat, true, p, now))
}

func gcraInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	p, written := gcraParams(e)
	field("max_burst", intReply(p.MaxBurst))
	if written {
		field("count", intReply(p.Count))
		field("period", strReply(SecondsText(p.Period)))
	}
	field("limit", intReply(p.Limit()))
	field("emission_interval_ns", intReply(p.EmissionInterval()))
	field("remaining", intReply(ratelimit.GCRARemaining(t.ExpireAt(e), true, p, now)))
}

// SecondsText writes ns as a decimal number of seconds, exactly and as
// short as it goes ("60", "1.5", "0.000000001"): a period as it was given.
func SecondsText(ns int64) string {
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	whole := strconv.FormatInt(ns/1e9, 10)
	frac := ns % 1e9
	if frac == 0 {
		return sign + whole
	}
	f := strconv.FormatInt(frac+1e9, 10)[1:] // nine digits, leading zeros kept
	return sign + whole + "." + strings.TrimRight(f, "0")
}
