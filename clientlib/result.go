package clientlib

import (
	"strconv"
	"time"
)

// Source says who produced a Result. Anything but FromServer is an answer
// the server did not give, and says so.
type Source uint8

const (
	// FromServer: the server decided, and the fields are its reply.
	FromServer Source = iota
	// FromCache: the over-limit cache answered "limited" because the server
	// said so earlier and its retry time has not come.
	FromCache
	// FromFallback: the server was unreachable and the in-process fallback
	// limiter decided. It is per process, so approximate.
	FromFallback
	// FromFailOpen: the server was unreachable and FailOpen allowed.
	FromFailOpen
	// FromFailClosed: the server was unreachable and FailClosed refused.
	FromFailClosed
)

var sourceNames = [...]string{"server", "cache", "fallback", "fail-open", "fail-closed"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// Result is one limit's decision, all fields from one reply.
type Result struct {
	// Allowed reports whether the units were admitted (and charged).
	Allowed bool
	// Limit is the most the limit admits at once: GCRA's burst, or a
	// window's limit.
	Limit int64
	// Remaining is how many more units would be admitted right now. -1 when
	// unknown: FailOpen and FailClosed answers, and the limits an
	// over-limit cache answer to All did not look at.
	Remaining int64
	// RetryAfter is how long until the same cost would be admitted. It is
	// -1 when allowed, and also -1 when the cost exceeds the limit and can
	// never succeed.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is back to full (GCRA, fixed
	// window) or its count has decayed to zero (sliding window and log).
	ResetAfter time.Duration
	// ResetAt is the local receive time plus ResetAfter. The server's own
	// stored absolute reset time is Info's ResetAt. A FailOpen or
	// FailClosed answer, knowing nothing, sets it to the time of the answer.
	ResetAt time.Time
	// Source is who decided.
	Source Source
	// Err is the transport error a failure policy answered for; nil when
	// Source is FromServer or FromCache.
	Err error
}

// Request is one limit of an All call. Cost 0 peeks: it reports the state
// and charges nothing, as on the server.
type Request struct {
	Key   string
	Limit Limit
	Cost  int64
}

// AllResult is the outcome of All: either every limit was charged or none.
type AllResult struct {
	// Allowed reports whether every limit admitted its cost.
	Allowed bool
	// Index is the position of the first limit that refused, or -1.
	Index int
	// Results holds each limit's decision, in request order.
	Results []Result
	// Source is who decided; see Result.Source.
	Source Source
	// Err is the transport error a failure policy answered for.
	Err error
}

// Info is what LIMIT.INFO reports about a live limiter.
type Info struct {
	// Family is the key's family among the decision families; for the
	// others (leaky-bucket, concurrency) FamilyName says which and
	// Family is FamilyGCRA's zero value.
	Family     Family
	FamilyName string
	Limit      int64
	Remaining  int64
	// ResetAt is the absolute reset time the server stores (reset_at_ms).
	// Unlike ResetAfter, it does not move between calls.
	ResetAt time.Time
	// ResetAfter is reset_after_ms as of the server's reply.
	ResetAfter time.Duration
	// Fields holds every integer field the server sent, by its name:
	// max_burst, count and emission_interval_ns (GCRA), window_ms, current
	// and previous (sliding window), count (fixed window), entries
	// (sliding log), and the ones above.
	Fields map[string]int64
	// Durations holds the fields the server sends as decimal seconds, the
	// parameters as they were given: period (GCRA) and window (the
	// window families).
	Durations map[string]time.Duration
}

func millis(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// resultFromReply converts a 5-field MS reply received at now.
func resultFromReply(v []int64, now time.Time) Result {
	r := Result{
		Allowed:    v[0] == 0,
		Limit:      v[1],
		Remaining:  v[2],
		RetryAfter: millis(v[3]),
		ResetAfter: millis(v[4]),
	}
	r.ResetAt = now.Add(r.ResetAfter)
	return r
}
