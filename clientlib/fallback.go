package clientlib

import (
	"math"
	"sync"
	"time"
)

// fallback is the in-process limiter FailFallback answers with: the same
// four shapes as the server (GCRA exactly; the sliding log approximated by
// the sliding window counter), on this process's monotonic clock. It only
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
// b and the previous window's in c.
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
	if l.Family == FamilyGCRA && l.Period <= maxPeriod/time.Duration(share) {
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

// fbDecide runs one decision on an entry, the way the server's algorithm
// for the limit's family would, returning the entry to store when write.
func fbDecide(e fbEntry, present bool, l Limit, cost int64, now timeNow) (fbEntry, bool, Result) {
	var d fbDecision
	switch l.Family {
	case FamilyGCRA:
		e, d = gcraDecide(e, present, l, cost, now.mono)
	case FamilyFixedWindow:
		e, d = fixedDecide(e, present, l, cost, now.mono)
	default:
		e, d = slidingDecide(e, present, l, cost, now.mono)
	}
	e.lim = l
	r := Result{
		Allowed:    !d.limited,
		Limit:      l.Max(),
		Remaining:  d.remaining,
		RetryAfter: -1,
		ResetAfter: time.Duration(d.resetAfter),
		Source:     FromFallback,
	}
	if d.retryAfter >= 0 {
		r.RetryAfter = time.Duration(d.retryAfter)
	}
	r.ResetAt = now.wall.Add(r.ResetAfter)
	return e, !d.limited && cost > 0, r
}

type fbDecision struct {
	limited                bool
	remaining              int64
	retryAfter, resetAfter int64 // ns; retryAfter -1 when allowed or never
}

// gcraDecide: the bucket is a theoretical arrival time (TAT). Each unit
// pushes it one emission interval later; a request fits while the TAT it
// would leave is at most the tolerance (burst intervals) ahead of now.
func gcraDecide(e fbEntry, present bool, l Limit, cost, now int64) (fbEntry, fbDecision) {
	ei := int64(l.Period) / l.Rate
	burst := l.burst()
	tolerance := ei * burst
	base := now
	if present && e.a > now {
		base = e.a
	}
	d := fbDecision{retryAfter: -1}
	remaining := func(ahead int64) int64 {
		if ahead >= tolerance {
			return 0
		}
		return (tolerance - ahead) / ei
	}
	if cost > burst {
		d.limited = true
		d.resetAfter = base - now
		d.remaining = remaining(d.resetAfter)
		return e, d
	}
	tat := base + ei*cost
	if allowAt := tat - tolerance; now < allowAt {
		d.limited = true
		d.retryAfter = allowAt - now
		d.resetAfter = base - now
		d.remaining = remaining(d.resetAfter)
		return e, d
	}
	e.a = tat
	d.resetAfter = tat - now
	d.remaining = remaining(d.resetAfter)
	return e, d
}

// roll moves a window entry to the window holding now, keeping the count of
// the window just ended as the previous one.
func roll(e fbEntry, present bool, w, now int64) fbEntry {
	start := now - now%w
	switch {
	case !present:
		e.a, e.b, e.c = start, 0, 0
	case e.a == start:
	case e.a == start-w:
		e.a, e.b, e.c = start, 0, e.b
	default:
		e.a, e.b, e.c = start, 0, 0
	}
	return e
}

// slidingDecide is the sliding window counter: the estimate is the previous
// window's count, weighted by how much of it still overlaps, plus the
// current count. Floats are fine here: the fallback is approximate anyway.
func slidingDecide(e fbEntry, present bool, l Limit, cost, now int64) (fbEntry, fbDecision) {
	w := int64(l.Period)
	e = roll(e, present, w, now)
	elapsed := now - e.a
	frac := float64(w-elapsed) / float64(w)
	est := float64(e.c)*frac + float64(e.b)
	d := fbDecision{retryAfter: -1}
	switch {
	case cost > l.Rate:
		d.limited = true
	case est+float64(cost) > float64(l.Rate):
		d.limited = true
		d.retryAfter = slidingRetry(e, l.Rate, cost, w, elapsed)
	case cost > 0:
		e.b += cost
		est += float64(cost)
	}
	d.remaining = max(int64(math.Floor(float64(l.Rate)-est)), 0)
	switch {
	case e.b > 0:
		d.resetAfter = 2*w - elapsed
	case e.c > 0:
		d.resetAfter = w - elapsed
	}
	return e, d
}

// slidingRetry finds when the estimate has decayed enough for cost: later
// in this window as the previous count fades, or in the next one as this
// window's count does.
func slidingRetry(e fbEntry, limit, cost, w, elapsed int64) int64 {
	if room := limit - e.b - cost; room >= 0 && e.c > room {
		at := int64(math.Ceil(float64(w) * (1 - float64(room)/float64(e.c))))
		if at < w {
			return max(at-elapsed, 1)
		}
	}
	untilNext := w - elapsed
	room := limit - cost
	if e.b <= room {
		return untilNext
	}
	return untilNext + int64(math.Ceil(float64(w)*(1-float64(room)/float64(e.b))))
}

// fixedDecide is the epoch-aligned counter (aligned to this process's
// monotonic clock here, which only shifts where windows start).
func fixedDecide(e fbEntry, present bool, l Limit, cost, now int64) (fbEntry, fbDecision) {
	w := int64(l.Period)
	start := now - now%w
	if !present || e.a != start {
		e.a, e.b, e.c = start, 0, 0
	}
	untilEnd := w - (now - start)
	d := fbDecision{retryAfter: -1}
	switch {
	case cost > l.Rate:
		d.limited = true
	case e.b > l.Rate-cost:
		d.limited = true
		d.retryAfter = untilEnd
	case cost > 0:
		e.b += cost
	}
	d.remaining = max(l.Rate-e.b, 0)
	if e.b > 0 {
		d.resetAfter = untilEnd
	}
	return e, d
}

// fbRefund gives n units back to one entry, never above full.
func fbRefund(e fbEntry, l Limit, n, now int64) fbEntry {
	if l.Family == FamilyGCRA {
		ei := int64(l.Period) / l.Rate
		if e.a <= now || n > (e.a-now)/ei {
			e.a = now
		} else {
			e.a -= n * ei
		}
		return e
	}
	take := min(n, e.b)
	e.b -= take
	e.c -= min(n-take, e.c)
	return e
}
