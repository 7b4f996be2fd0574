package engine

import "github.com/sluicehq/sluice/shard"

// The commands over any limiter family: LIMIT.REFUND and LIMIT.INFO on one
// key (each family supplies its part), and LIMIT.ALL over several.

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
		return gcraRefund(t, e, amount, now)
	case shard.KindSlidingWindow:
		return swRefund(t, e, amount, now)
	case shard.KindFixedWindow:
		return fwRefund(t, e, amount, now)
	case shard.KindSlidingLog:
		return j.slRefund(t, e, amount, now)
	case shard.KindLeakyBucket:
		return lbRefund(t, e, amount, now)
	case shard.KindConcurrency:
		return errReply(ErrConcRefund)
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
		gcraInfo(t, e, now, field)
	case shard.KindSlidingWindow:
		swInfo(t, e, now, field)
	case shard.KindFixedWindow:
		fwInfo(t, e, now, field)
	case shard.KindSlidingLog:
		j.slInfo(t, e, now, field)
	case shard.KindLeakyBucket:
		lbInfo(t, e, now, field)
	case shard.KindConcurrency:
		concInfo(t, e, now, field)
	default:
		return errReply(ErrWrongType)
	}
	field("reset_at_ms", intReply(MillisRoundedUp(resetAt)))
	field("reset_after_ms", intReply(MillisRoundedUp(resetAt-now)))
	return Reply{Kind: ReplyMap, Items: items}
}

// limitAll decides every limit against one consistent state and applies all
// of them or none. Each limit's reply is its decision at that instant: a
// limit that trips reports its own state, and the others report what they
// would have been, with nothing consumed.
func (x *heldRun) limitAll(c *Command) Reply {
	e, now, tables, jobs := x.e, x.now, x.tables, x.jobs
	for i := range c.Sub {
		for k := 0; k < i; k++ {
			if string(c.Sub[k].Key) == string(c.Sub[i].Key) {
				return errReply(ErrSameKeyTwice)
			}
		}
	}
	if len(c.ReqID) > 0 {
		s := e.shardOf(c.Sub[0].hash)
		if r, ok := jobs[s].findReceipt(tables[s], c.Sub[0].Key, c.ReqID, now); ok {
			r.unchanged = true
			return r
		}
	}
	replies := make([]Reply, len(c.Sub))
	firstTrip := -1
	for i := range c.Sub {
		s := e.shardOf(c.Sub[i].hash)
		j := jobs[s]
		// The dry run decides without writing or counting.
		j.dryRun = true
		replies[i] = j.apply(tables[s], &c.Sub[i], now)
		j.dryRun = false
		if firstTrip < 0 && (replies[i].Kind == ReplyError || replies[i].Dec.Limited) {
			firstTrip = i
		}
	}
	if firstTrip >= 0 {
		if replies[firstTrip].Kind == ReplyError {
			return replies[firstTrip]
		}
		j := jobs[e.shardOf(c.Sub[firstTrip].hash)]
		j.limited++
		if trip := &c.Sub[firstTrip]; !e.hotOff.Load() && !trip.Op.spec().peek(trip) {
			j.recordHot(trip, true, now)
		}
		if c.Sub[firstTrip].Op == OpConcAcquire {
			// Refused in the dry run, which counts nothing.
			e.stats[j.shard].leasesRefused.Add(1)
		}
		r := Reply{Kind: ReplyArray, Items: []Reply{intReply(1), intReply(int64(firstTrip)), {Kind: ReplyArray, Items: replies}}}
		x.keepReceipt(c, &r)
		return r
	}
	// The commit is journaled as plain decisions: they were allowed
	// against this state, so replay allows them again.
	for i := range c.Sub {
		s := e.shardOf(c.Sub[i].hash)
		j := jobs[s]
		j.committing = true
		replies[i] = j.apply(tables[s], &c.Sub[i], now)
		j.committing = false
		x.changed(s, &c.Sub[i], &replies[i])
	}
	r := Reply{Kind: ReplyArray, Items: []Reply{intReply(0), intReply(-1), {Kind: ReplyArray, Items: replies}}}
	x.keepReceipt(c, &r)
	return r
}

// keepReceipt stores a LIMIT.ALL's reply as the receipt of its request id,
// on its first limit's key, and journals it (the decisions are journaled
// one by one, without the id).
func (x *heldRun) keepReceipt(c *Command, r *Reply) {
	if len(c.ReqID) == 0 {
		return
	}
	first := &c.Sub[0]
	s := x.e.shardOf(first.hash)
	j := x.jobs[s]
	j.putReceipt(x.tables[s], first.Key, c.ReqID, c.ReqTTL, x.now, r)
	x.record(s, Command{Op: OpReceipt, Key: first.Key, Value: append([]byte(nil), j.rval...), ReqID: c.ReqID, ReqTTL: c.ReqTTL})
}
