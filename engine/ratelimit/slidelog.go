package ratelimit

// SLEntry is one admitted batch of N units at time At. Only admitted units
// are logged, never refused ones, so a key's log holds at most Limit entries
// however hard it is hammered.
type SLEntry struct{ At, N int64 }

// SLDecide runs one SL.CHECK at now over entries, oldest first. A unit
// admitted at At counts until At+Window (exclusive), so at most Limit units
// are admitted in any rolling interval of length Window.
//
// expired is how many leading entries have left the window; the caller may
// drop them (dropping or keeping them never changes an answer). When admit is
// true the caller appends {now, cost}, or adds cost to the newest entry if
// its At is now, and stores resetAt as the key's absolute reset timestamp.
// A limited check and a peek (cost 0) admit nothing. p must have passed
// Validate; a negative cost is treated as a peek.
func SLDecide(entries []SLEntry, p WindowParams, cost, now int64) (expired int, admit bool, resetAt int64, d Decision) {
	now = max(now, 0)
	cutoff := now - p.Window
	for expired < len(entries) && entries[expired].At <= cutoff {
		expired++
	}
	entries = entries[expired:]
	live := slUnits(entries)
	cost = max(cost, 0)
	d = Decision{Limit: p.Limit, RetryAfter: -1}
	switch {
	case cost > p.Limit:
		d.Limited = true
	case live > p.Limit-cost:
		d.Limited = true
		d.RetryAfter = slRetryAfter(entries, live-(p.Limit-cost), p.Window, now)
	case cost > 0:
		admit = true
		live += cost
	}
	d.Remaining = max(p.Limit-live, 0)
	switch {
	case admit:
		d.ResetAfter = p.Window
	case len(entries) > 0:
		d.ResetAfter = slLeavesAfter(entries[len(entries)-1], p.Window, now)
	}
	return expired, admit, addSat(now, d.ResetAfter), d
}

// slUnits sums the live units, saturating so that a corrupt log cannot wrap
// the count into an admission. A valid log sums to at most the largest limit
// it was checked against.
func slUnits(entries []SLEntry) int64 {
	var n int64
	for _, e := range entries {
		n = addSat(n, max(e.N, 0))
	}
	return n
}

// slLeavesAfter is how long until e's units leave the window. An entry
// stamped after now can only come from corrupt state; it is read as now so
// the span stays within one window.
func slLeavesAfter(e SLEntry, w, now int64) int64 {
	return w - (now - min(e.At, now))
}

// slRetryAfter is when the oldest excess units have left: walking from the
// oldest entry, the first one at which that many units have gone.
func slRetryAfter(entries []SLEntry, excess, w, now int64) int64 {
	for _, e := range entries {
		excess -= max(e.N, 0)
		if excess <= 0 {
			return slLeavesAfter(e, w, now)
		}
	}
	// Unreachable for cost <= Limit, since then excess <= live; kept as a
	// safe answer for saturated, corrupt logs.
	return slLeavesAfter(entries[len(entries)-1], w, now)
}

// SLRefund gives back the newest amount units, shrinking or dropping the
// newest entries in place. A negative amount refunds nothing. The caller
// treats an empty result as no live state.
func SLRefund(entries []SLEntry, amount int64) (keep []SLEntry) {
	for amount > 0 && len(entries) > 0 {
		last := &entries[len(entries)-1]
		if last.N > amount {
			last.N -= amount
			break
		}
		amount -= max(last.N, 0)
		entries = entries[:len(entries)-1]
	}
	return entries
}

// SLRemaining is the remaining a peek would report, for LIMIT.INFO and the
// LIMIT.REFUND reply.
func SLRemaining(entries []SLEntry, p WindowParams, now int64) int64 {
	_, _, _, d := SLDecide(entries, p, 0, now)
	return d.Remaining
}
