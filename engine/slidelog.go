package engine

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/shard"
)

// SL.CHECK: the exact sliding log, stored as a ring of admitted batches.

// MaxLogLimit bounds a sliding log's limit so that its worst case, one
// 16-byte entry per unit (each admitted at its own moment), fits one
// record: 65,000 entries take 1,040,032 bytes, which leaves room for a key
// of up to about 8 KB.
const MaxLogLimit = 65000

// LogFits reports whether a sliding log with this limit can grow to its
// worst case beside a key of keyLen bytes. The parsers refuse a decision
// that fails it, before anything is stored or journaled; the engine does
// not check it again, so that a log a replayed record or a peer accepted
// is rebuilt as it was.
func LogFits(keyLen int, limit int64) bool {
	return limit <= MaxLogLimit && shard.Fits(keyLen, slRingHeader+slEntryLength*int(max(limit, 1)))
}

// slRing is a sliding log stored as a ring of (at, n) entries inside the
// record's payload, oldest first from head, with a running total of the
// units it holds. A decision then costs O(1) plus the entries that have
// just left the window, instead of a pass over the whole log; the ring
// grows by doubling, so a key's memory stays bounded by its limit.
//
//	window | limit | total | head u32 | count u32 | cap x (at, n)
type slRing struct{ b []byte }

const slRingHeader = 32

func (r slRing) window() int64 { return getI(r.b, 0) }
func (r slRing) limit() int64  { return getI(r.b, 1) }
func (r slRing) total() int64  { return getI(r.b, 2) }
func (r slRing) head() int     { return int(binary.LittleEndian.Uint32(r.b[24:])) }
func (r slRing) count() int    { return int(binary.LittleEndian.Uint32(r.b[28:])) }
func (r slRing) capacity() int { return (len(r.b) - slRingHeader) / slEntryLength }
func (r slRing) entry(i int) ratelimit.SLEntry {
	k := (r.head() + i) % r.capacity()
	body := r.b[slRingHeader:]
	return ratelimit.SLEntry{At: getI(body, 2*k), N: getI(body, 2*k+1)}
}
func (r slRing) setEntry(i int, en ratelimit.SLEntry) {
	k := (r.head() + i) % r.capacity()
	body := r.b[slRingHeader:]
	putI(body, 2*k, en.At)
	putI(body, 2*k+1, en.N)
}
func (r slRing) setHeadCount(head, count int) {
	binary.LittleEndian.PutUint32(r.b[24:], uint32(head))
	binary.LittleEndian.PutUint32(r.b[28:], uint32(count))
}

// expired counts the leading entries and units that have left the window
// at now, without changing anything.
func (r slRing) expired(now int64) (entries int, units int64) {
	cutoff := now - r.window()
	for entries < r.count() {
		en := r.entry(entries)
		if en.At > cutoff {
			break
		}
		entries++
		units += en.N
	}
	return entries, units
}

// retryAfter is how long until enough of the oldest live units leave the
// window for cost to fit; the caller knows cost <= limit.
func (r slRing) retryAfter(skip int, live, cost, now int64) int64 {
	excess := live + cost - r.limit()
	for i := skip; i < r.count(); i++ {
		en := r.entry(i)
		excess -= en.N
		if excess <= 0 {
			return en.At + r.window() - now
		}
	}
	return r.window()
}

// slDecide is SLDecide over the ring, without a pass over the whole log.
func slDecide(r slRing, present bool, p ratelimit.WindowParams, cost, now int64) (skip int, gone int64, admit bool, d ratelimit.Decision) {
	var live int64
	if present {
		skip, gone = r.expired(now)
		live = r.total() - gone
	}
	cost = max(cost, 0)
	d = ratelimit.Decision{Limit: p.Limit, RetryAfter: -1}
	switch {
	case cost > p.Limit:
		d.Limited = true
	case live > p.Limit-cost:
		d.Limited = true
		d.RetryAfter = r.retryAfter(skip, live, cost, now)
	case cost > 0:
		admit = true
		live += cost
	}
	d.Remaining = max(p.Limit-live, 0)
	switch {
	case admit:
		d.ResetAfter = p.Window
	case present && skip < r.count():
		d.ResetAfter = r.entry(r.count()-1).At + p.Window - now
	}
	return skip, gone, admit, d
}

func (j *shardJob) slidingLog(t *shard.Table, c *Command, now int64) Reply {
	p := ratelimit.WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindSlidingLog)
	if err != nil {
		return errReply(err)
	}
	r := slRing{e.Payload}
	// Units logged under another window length say nothing about this one.
	present := ok && r.window() == p.Window
	skip, gone, admit, d := slDecide(r, present, p, c.N[2], now)
	if err := j.dryRunCreate(admit && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if admit && !j.dryRun {
		if e, err = j.slAdmit(t, c, e, present, skip, gone, p, c.N[2], now); err != nil {
			return errReply(err)
		}
	}
	return decReply(d, c.Flags)
}

// slAdmit drops the entries that left the window and logs cost at now,
// growing the ring when it is full.
func (j *shardJob) slAdmit(t *shard.Table, c *Command, e shard.Entry, present bool, skip int, gone int64, p ratelimit.WindowParams, cost, now int64) (shard.Entry, error) {
	created := e.Payload == nil
	if created {
		var err error
		if e, err = j.create(t, c, shard.KindSlidingLog, now+p.Window, slRingHeader+slEntryLength); err != nil {
			return e, err
		}
	}
	r := slRing{e.Payload}
	if !present || len(r.b) < slRingHeader+slEntryLength {
		var err error
		if e, err = t.Resize(e, slRingHeader+slEntryLength); err != nil {
			return e, err
		}
		r = slRing{e.Payload}
		clear(r.b)
		skip, gone = 0, 0
	}
	head, count, total := r.head(), r.count()-skip, r.total()-gone
	if r.capacity() > 0 {
		head = (head + skip) % r.capacity()
	}
	r.setHeadCount(head, count)
	if count > 0 && r.entry(count-1).At == now {
		last := r.entry(count - 1)
		last.N += cost
		r.setEntry(count-1, last)
	} else {
		if count == r.capacity() {
			// Linearize into a ring twice the size. It never needs more
			// than limit entries: each holds at least one unit.
			grown := min(max(2*count, 2), int(p.Limit))
			old := j.log[:0]
			for i := 0; i < count; i++ {
				old = append(old, r.entry(i))
			}
			j.log = old
			var err error
			if e, err = t.Resize(e, slRingHeader+slEntryLength*grown); err != nil {
				return e, err
			}
			r = slRing{e.Payload}
			r.setHeadCount(0, count)
			for i, en := range old {
				r.setEntry(i, en)
			}
		}
		r.setHeadCount(r.head(), count+1)
		r.setEntry(count, ratelimit.SLEntry{At: now, N: cost})
	}
	putI(r.b, 0, p.Window)
	putI(r.b, 1, p.Limit)
	putI(r.b, 2, total+cost)
	t.SetExpireAt(e, now+p.Window)
	return e, nil
}

// slEntries copies a log's live entries (oldest first) into the job's
// scratch slice, for refunds and LIMIT.INFO.
func (j *shardJob) slEntries(e shard.Entry) ([]ratelimit.SLEntry, ratelimit.WindowParams) {
	r := slRing{e.Payload}
	j.log = j.log[:0]
	for i := 0; i < r.count(); i++ {
		j.log = append(j.log, r.entry(i))
	}
	return j.log, ratelimit.WindowParams{Window: r.window(), Limit: r.limit()}
}

// storeLog rewrites a log from entries (oldest first).
func storeLog(t *shard.Table, e shard.Entry, p ratelimit.WindowParams, entries []ratelimit.SLEntry) (shard.Entry, error) {
	e, err := t.Resize(e, slRingHeader+slEntryLength*max(len(entries), 1))
	if err != nil {
		return e, err
	}
	r := slRing{e.Payload}
	clear(r.b)
	putI(r.b, 0, p.Window)
	putI(r.b, 1, p.Limit)
	var total int64
	r.setHeadCount(0, len(entries))
	for i, en := range entries {
		r.setEntry(i, en)
		total += en.N
	}
	putI(r.b, 2, total)
	return e, nil
}

func (j *shardJob) slRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply {
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

func (j *shardJob) slInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {
	entries, p := j.slEntries(e)
	expired, _, _, _ := ratelimit.SLDecide(entries, p, 0, now)
	field("limit", intReply(p.Limit))
	field("window", strReply(SecondsText(p.Window)))
	field("window_ms", intReply(p.Window/1e6))
	field("remaining", intReply(ratelimit.SLRemaining(entries, p, now)))
	field("entries", intReply(int64(len(entries)-expired)))
}
