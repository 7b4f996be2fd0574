package clientlib

import (
	"sync"
	"time"
)

// overLimitCache remembers refusals: after the server says key+limit is
// limited for cost c until T, any cost >= c is refused locally until T (a
// larger cost is refused at least as long by every family). It only ever
// answers "limited", so it can never admit what the server would refuse.
//
// T is computed conservatively: from the moment the request was *sent*
// (the server decided later than that), minus the 1 ms the server's
// rounding up to milliseconds may have added. So the cache stops answering
// no later than the server's own retry time. It may still refuse after a
// reset or refund made by another process; this process's own Reset and
// Refund clear the key.
//
// Layout: a fixed array of 4-way sets with one mutex per set, chosen by the
// key's hash alone so that Refund and Reset, which know only the key, can
// find every limit of it in one set. Entries hold hashes, not strings: a
// hit builds nothing and allocates nothing, and the table holds no pointers
// for the collector to scan. A 64-bit key hash collision (odds about n^2 /
// 2^65 for n hot keys) could refuse an innocent key until T; it cannot
// admit anything.
type overLimitCache struct {
	sets []cacheSet
	mask uint64
}

const cacheWays = 4

type cacheSet struct {
	mu sync.Mutex
	// hits is counted here, under the set's lock, rather than in one
	// shared atomic that every core's hit would contend on.
	hits uint64
	ways [cacheWays]cacheEntry
}

type cacheEntry struct {
	keyHash, limHash uint64
	cost             int64
	until            int64 // mono ns: refuse while now < until; 0 is empty
	retryAt          int64 // mono ns: the server's retry time as reported
	resetAt          int64 // mono ns
	resetWall        int64 // unix ns: Result.ResetAt, fixed at the reply
	limit, remaining int64
}

func newOverLimitCache(capacity int) *overLimitCache {
	n := 1
	for n*cacheWays < capacity {
		n <<= 1
	}
	return &overLimitCache{sets: make([]cacheSet, n), mask: uint64(n - 1)}
}

// get returns a refusal for key+limit at cost, if one is cached and live.
// It reads no clock of its own: now is monotonic, and ResetAt was fixed
// when the refusal arrived.
func (c *overLimitCache) get(kh, lh uint64, cost int64, now int64) (Result, bool) {
	s := &c.sets[kh&c.mask]
	s.mu.Lock()
	for i := range s.ways {
		e := &s.ways[i]
		if e.keyHash == kh && e.limHash == lh && now < e.until && cost >= e.cost {
			r := Result{
				Limit:      e.limit,
				Remaining:  e.remaining,
				RetryAfter: time.Duration(e.retryAt - now),
				ResetAfter: time.Duration(max(e.resetAt-now, 0)),
				Source:     FromCache,
			}
			wall := e.resetWall
			s.hits++
			s.mu.Unlock()
			r.ResetAt = time.Unix(0, wall)
			return r, true
		}
	}
	s.mu.Unlock()
	return Result{}, false
}

// put records a refusal r received for a request sent at sent.
func (c *overLimitCache) put(kh, lh uint64, cost int64, r Result, sent int64) {
	retryAt := sent + int64(r.RetryAfter)
	e := cacheEntry{
		keyHash: kh, limHash: lh, cost: cost,
		until:     retryAt - int64(time.Millisecond),
		retryAt:   retryAt,
		resetAt:   sent + int64(r.ResetAfter),
		resetWall: r.ResetAt.UnixNano(),
		limit:     r.Limit, remaining: r.Remaining,
	}
	if e.until <= sent {
		return
	}
	s := &c.sets[kh&c.mask]
	s.mu.Lock()
	defer s.mu.Unlock()
	victim := 0
	for i := range s.ways {
		w := &s.ways[i]
		if w.keyHash == kh && w.limHash == lh {
			victim = i
			break
		}
		// Otherwise the entry ending soonest: an empty or expired one has
		// the smallest until of all.
		if w.until < s.ways[victim].until {
			victim = i
		}
	}
	s.ways[victim] = e
}

// forget drops every limit cached for a key.
func (c *overLimitCache) forget(kh uint64) {
	s := &c.sets[kh&c.mask]
	s.mu.Lock()
	for i := range s.ways {
		if s.ways[i].keyHash == kh {
			s.ways[i] = cacheEntry{}
		}
	}
	s.mu.Unlock()
}

// hits sums the sets' hit counters.
func (c *overLimitCache) hits() uint64 {
	var n uint64
	for i := range c.sets {
		s := &c.sets[i]
		s.mu.Lock()
		n += s.hits
		s.mu.Unlock()
	}
	return n
}
