package ratelimit

// FWState is the fixed window's stored state: Count units admitted in the
// window that starts at Start, a multiple of Window since the epoch.
type FWState struct{ Start, Count int64 }

// FWDecide runs one FW.CHECK at now. next and resetAt (the window's end, the
// key's absolute reset timestamp) are to be stored only when write is true: a
// limited check and a peek (cost 0) change nothing. ResetAfter is the time to
// the window's end while the window has counted anything, and 0 when it has
// not (the limiter is already full). p must have passed Validate; a negative
// cost is treated as a peek.
//
// The boundary burst is the algorithm's, not a bug: Limit units at the end of
// one window and Limit more at the start of the next all pass.
func FWDecide(s FWState, present bool, p WindowParams, cost, now int64) (next FWState, resetAt int64, write bool, d Decision) {
	now = max(now, 0)
	ws := windowStart(now, p.Window)
	// State from another window, including one written under a different
	// window length, has nothing to say about this one.
	if !present || s.Start != ws {
		s = FWState{Start: ws}
	}
	s.Count = max(s.Count, 0)
	untilEnd := p.Window - (now - ws)
	cost = max(cost, 0)
	d = Decision{Limit: p.Limit, RetryAfter: -1}
	switch {
	case cost > p.Limit:
		d.Limited = true
	case s.Count > p.Limit-cost:
		d.Limited = true
		d.RetryAfter = untilEnd
	case cost > 0:
		s.Count += cost
		write = true
	}
	d.Remaining = max(p.Limit-s.Count, 0)
	if s.Count > 0 {
		d.ResetAfter = untilEnd
	}
	return s, addSat(now, d.ResetAfter), write, d
}

// FWRefund gives back amount units, never below zero. live is false when the
// count is back to zero and the key can be deleted. The caller passes only
// live state (its window has not ended). A negative amount refunds nothing.
func FWRefund(s FWState, amount int64) (next FWState, live bool) {
	s.Count -= min(max(amount, 0), max(s.Count, 0))
	return s, s.Count > 0
}

// FWRemaining is the remaining a peek would report, for LIMIT.INFO and the
// LIMIT.REFUND reply.
func FWRemaining(s FWState, present bool, p WindowParams, now int64) int64 {
	_, _, _, d := FWDecide(s, present, p, 0, now)
	return d.Remaining
}
