package clientlib

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// fallback is the in-process limiter FailFallback answers with: the same
// four shapes as the server, computed by the server's own algorithms
// (package ratelimit; the sliding log approximated by the sliding window
// counter, to keep each entry a fixed size), on this process's monotonic
// clock. It only
// sees this process's traffic, and it holds at most capacity entries,
// dropping the oldest when full; both make it approximate, which is
// acceptable for the minutes of an outage and not beyond.
//
// One mutex guards it: it runs only while the server is unreachable, and
// one lock makes All's all-or-nothing trivially atomic.
type fallback struct {
	mu    sync.Mutex
	index map[uint64]int // id -> slot
	slots []fbEntry
	next  int // the slot to reuse next: the oldest once the ring has filled
	share int64
}

// fbEntry is one key+limit's state. GCRA keeps its theoretical arrival time
// in a; the window shapes keep the window start in a, the current count in
// b and (sliding window) the previous window's in c.
type fbEntry struct {
	id      uint64
	keyHash uint64
	used    bool
	lim     Limit // as scaled, for refunds by key
	a, b, c int64
}

func newFallback(capacity int, share int64) *fallback {
	return &fallback{index: make(map[uint64]int, capacity), slots: make([]fbEntry, capacity), share: share}
}

// scaled divides a limit among share processes, rounding up so that no
// limit drops to zero.
func (l Limit) scaled(share int64) Limit {
	if share <= 1 {
		return l
	}
	div := func(x int64) int64 { return (x + share - 1) / share }
	l.Burst = div(l.burst())
	if l.Family != FamilyGCRA {
		l.Rate = div(l.Rate)
	}
	// GCRA's rate is divided by stretching the period, which keeps the
	// emission interval at least 1ns where dividing the count might not.
	if l.Family == FamilyGCRA && int64(l.Period) <= ratelimit.MaxDuration/share {
		l.Period *= time.Duration(share)
	}
	return l
}

// lookup returns id's entry and true, or a fresh entry and false. Callers
// hold mu.
func (f *fallback) lookup(id uint64) (fbEntry, bool) {
	if i, ok := f.index[id]; ok {
		return f.slots[i], true
	}
	return fbEntry{id: id}, false
}

// store writes e back, taking the oldest slot for a new id.
func (f *fallback) store(e fbEntry, keyHash uint64) {
	if i, ok := f.index[e.id]; ok {
		e.keyHash, e.used = keyHash, true
		f.slots[i] = e
		return
	}
	i := f.next
	f.next = (f.next + 1) % len(f.slots)
	if old := f.slots[i]; old.used {
		delete(f.index, old.id)
	}
	e.keyHash, e.used = keyHash, true
	f.slots[i] = e
	f.index[e.id] = i
}

func (f *fallback) decide(key string, limit Limit, cost int64, now timeNow) Result {
	kh := keyHashOf(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	e, present := f.lookup(mix(kh ^ limit.hash()))
	next, write, r := fbDecide(e, present, limit.scaled(f.share), cost, now)
	if write {
		f.store(next, kh)
	}
	return r
}

// all is All's fallback: decide every limit against the current state, and
// store the new states only if every one admits.
func (f *fallback) all(reqs []Request, out []Result, now timeNow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make([]fbEntry, len(reqs))
	writes := make([]bool, len(reqs))
	ok := true
	for i, q := range reqs {
		e, present := f.lookup(fallbackID(q.Key, q.Limit))
		next[i], writes[i], out[i] = fbDecide(e, present, q.Limit.scaled(f.share), q.Cost, now)
		ok = ok && out[i].Allowed
	}
	if !ok {
		return
	}
	for i, q := range reqs {
		if writes[i] {
			f.store(next[i], keyHashOf(q.Key))
		}
	}
}

// refund gives n units back to one key+limit, never above full.
func (f *fallback) refund(id uint64, n, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i, ok := f.index[id]; ok {
		f.slots[i] = fbRefund(f.slots[i], f.slots[i].lim, n, now)
	}
}

// refundKey refunds every limit held for a key: LIMIT.REFUND names only the
// key. The scan is over a bounded table and runs only during an outage.
func (f *fallback) refundKey(keyHash uint64, n, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.slots {
		if e := &f.slots[i]; e.used && e.keyHash == keyHash {
			*e = fbRefund(*e, e.lim, n, now)
		}
	}
}

// forgetKey drops every limit held for a key.
func (f *fallback) forgetKey(keyHash uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.slots {
		if e := &f.slots[i]; e.used && e.keyHash == keyHash {
			delete(f.index, e.id)
			*e = fbEntry{}
		}
	}
}

// fbDecide runs one decision on an entry with the server's own algorithm
// for the limit's family (package ratelimit), returning the entry to store
// when write.
func fbDecide(e fbEntry, present bool, l Limit, cost int64, now timeNow) (fbEntry, bool, Result) {
	var d ratelimit.Decision
	write := false
	switch l.Family {
	case FamilyGCRA:
		var tat int64
		tat, write, d = ratelimit.GCRADecide(e.a, present, gcraParams(l), cost, now.mono)
		if write {
			e.a = tat
		}
	case FamilyFixedWindow:
		var s ratelimit.FWState
		s, _, write, d = ratelimit.FWDecide(ratelimit.FWState{Start: e.a, Count: e.b}, present, windowParams(l), cost, now.mono)
		if write {
			e.a, e.b = s.Start, s.Count
		}
	default:
		var s ratelimit.SWState
		s, _, write, d = ratelimit.SWDecide(ratelimit.SWState{Start: e.a, Cur: e.b, Prev: e.c}, present, windowParams(l), cost, now.mono)
		if write {
			e.a, e.b, e.c = s.Start, s.Cur, s.Prev
		}
	}
	e.lim = l
	r := Result{
		Allowed:    !d.Limited,
		Limit:      l.Max(),
		Remaining:  d.Remaining,
		RetryAfter: -1,
		ResetAfter: time.Duration(d.ResetAfter),
		Source:     FromFallback,
	}
	if d.RetryAfter >= 0 {
		r.RetryAfter = time.Duration(d.RetryAfter)
	}
	r.ResetAt = now.wall.Add(r.ResetAfter)
	return e, write, r
}

// gcraParams maps a GCRA limit onto CL.THROTTLE's arguments (redis-cell
// admits max_burst+1 at once).
func gcraParams(l Limit) ratelimit.GCRAParams {
	return ratelimit.GCRAParams{MaxBurst: l.burst() - 1, Count: l.Rate, Period: int64(l.Period)}
}

func windowParams(l Limit) ratelimit.WindowParams {
	return ratelimit.WindowParams{Limit: l.Rate, Window: int64(l.Period)}
}

// fbRefund gives n units back to one entry, never above full, as
// LIMIT.REFUND does on the server.
func fbRefund(e fbEntry, l Limit, n, now int64) fbEntry {
	switch l.Family {
	case FamilyGCRA:
		tat, _ := ratelimit.GCRARefund(e.a, gcraParams(l), n, now)
		e.a = tat
	case FamilyFixedWindow:
		s, _ := ratelimit.FWRefund(ratelimit.FWState{Start: e.a, Count: e.b}, n)
		e.b = s.Count
	default:
		s, _, _ := ratelimit.SWRefund(ratelimit.SWState{Start: e.a, Cur: e.b, Prev: e.c}, windowParams(l), n, now)
		e.a, e.b, e.c = s.Start, s.Cur, s.Prev
	}
	return e
}
