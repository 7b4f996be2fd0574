package engine

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/shard"
)

// Limiter records keep their absolute reset timestamp in the record's
// expiry, so an expired limiter is absent to every read, and only the
// parameters and counters in the payload. Layouts (little-endian int64s):
//
//	gcra:           emission interval, max_burst            (TAT = expiry)
//	sliding-window: window, limit, cur, prev                 (start derived from expiry)
//	fixed-window:   window, limit, count                     (start = expiry - window)
//	sliding-log:    window, limit, then (at, n) per admitted batch, oldest first
const (
	gcraPayload   = 16
	swPayload     = 32
	fwPayload     = 24
	slHeader      = 16
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

func (j *shardJob) throttle(t *shard.Table, c *Command, now int64) Reply {
	p := GCRAParams{MaxBurst: c.N[0], Count: c.N[1], Period: c.N[2]}
	e, ok, err := lookup(t, c, now, shard.KindGCRA)
	if err != nil {
		return errReply(err)
	}
	var tat int64
	if ok {
		tat = t.ExpireAt(e)
	}
	newTAT, write, d := GCRADecide(tat, ok, p, c.N[3], now)
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
	j.count(d)
	return decReply(d, c.Flags)
}

func gcraParams(e shard.Entry) GCRAParams {
	return GCRAParams{MaxBurst: getI(e.Payload, 1), Count: 1, Period: getI(e.Payload, 0)}
}

func swState(t *shard.Table, e shard.Entry) (SWState, WindowParams) {
	p := WindowParams{Window: getI(e.Payload, 0), Limit: getI(e.Payload, 1)}
	s := SWState{Cur: getI(e.Payload, 2), Prev: getI(e.Payload, 3)}
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
	p := WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindSlidingWindow)
	if err != nil {
		return errReply(err)
	}
	var s SWState
	if ok {
		var stored WindowParams
		s, stored = swState(t, e)
		// Counts taken over windows of another length mean nothing under
		// this one: a changed window starts the limiter afresh.
		ok = stored.Window == p.Window
	}
	next, resetAt, write, d := SWDecide(s, ok, p, c.N[2], now)
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
	j.count(d)
	return decReply(d, c.Flags)
}

func fwState(t *shard.Table, e shard.Entry) (FWState, WindowParams) {
	p := WindowParams{Window: getI(e.Payload, 0), Limit: getI(e.Payload, 1)}
	return FWState{Start: t.ExpireAt(e) - p.Window, Count: getI(e.Payload, 2)}, p
}

func (j *shardJob) fixedWindow(t *shard.Table, c *Command, now int64) Reply {
	p := WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindFixedWindow)
	if err != nil {
		return errReply(err)
	}
	var s FWState
	if ok {
		var stored WindowParams
		s, stored = fwState(t, e)
		ok = stored.Window == p.Window
	}
	next, resetAt, write, d := FWDecide(s, ok, p, c.N[2], now)
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
	j.count(d)
	return decReply(d, c.Flags)
}

// slEntries decodes a sliding log into the job's scratch slice.
func (j *shardJob) slEntries(e shard.Entry) ([]SLEntry, WindowParams) {
	p := WindowParams{Window: getI(e.Payload, 0), Limit: getI(e.Payload, 1)}
	body := e.Payload[slHeader:]
	n := len(body) / slEntryLength
	j.log = j.log[:0]
	for i := 0; i < n; i++ {
		j.log = append(j.log, SLEntry{At: getI(body, 2*i), N: getI(body, 2*i+1)})
	}
	return j.log, p
}

// storeLog writes entries back into e, resizing the record to fit.
func storeLog(t *shard.Table, e shard.Entry, p WindowParams, entries []SLEntry) (shard.Entry, error) {
	e, err := t.Resize(e, slHeader+slEntryLength*len(entries))
	if err != nil {
		return e, err
	}
	putI(e.Payload, 0, p.Window)
	putI(e.Payload, 1, p.Limit)
	body := e.Payload[slHeader:]
	for i, en := range entries {
		putI(body, 2*i, en.At)
		putI(body, 2*i+1, en.N)
	}
	return e, nil
}

func (j *shardJob) slidingLog(t *shard.Table, c *Command, now int64) Reply {
	p := WindowParams{Limit: c.N[0], Window: c.N[1]}
	e, ok, err := lookup(t, c, now, shard.KindSlidingLog)
	if err != nil {
		return errReply(err)
	}
	var entries []SLEntry
	if ok {
		var stored WindowParams
		entries, stored = j.slEntries(e)
		if stored.Window != p.Window {
			entries = entries[:0]
		}
	}
	expired, admit, resetAt, d := SLDecide(entries, p, c.N[2], now)
	if err := j.dryRunCreate(admit && e.Payload == nil); err != nil {
		return errReply(err)
	}
	if admit && !j.dryRun {
		entries = entries[expired:]
		if n := len(entries); n > 0 && entries[n-1].At == now {
			entries[n-1].N += c.N[2]
		} else {
			entries = append(entries, SLEntry{At: now, N: c.N[2]})
		}
		created := e.Payload == nil
		if created {
			e, err = j.create(t, c, shard.KindSlidingLog, resetAt, 0)
		}
		if err == nil {
			e, err = storeLog(t, e, p, entries)
		}
		if err != nil {
			if created && e.Payload != nil {
				t.Delete(e)
			}
			return errReply(err)
		}
		t.SetExpireAt(e, resetAt)
	}
	j.count(d)
	return decReply(d, c.Flags)
}
