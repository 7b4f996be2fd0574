package ratelimit

import "errors"

// Decision is the 5-field reply shared by every decision command. Durations
// are nanoseconds; the server converts them with SecondsRoundedUp or
// MillisRoundedUp.
type Decision struct {
	Limited   bool
	Limit     int64
	Remaining int64
	// RetryAfter is -1 when allowed, and also -1 when the cost can never
	// succeed because it exceeds the limit.
	RetryAfter int64
	// ResetAfter is the time until the limiter is full again (GCRA, fixed
	// window) or its estimate has decayed to zero (sliding window and log).
	ResetAfter int64
}

// GCRA parameter errors name the argument at fault, so the server can reply
// with them unchanged.
var (
	ErrBurstNegative  = errors.New("max_burst must not be negative")
	ErrCountRange     = errors.New("count must be at least 1")
	ErrPeriodRange    = errors.New("period must be positive")
	ErrPeriodTooLarge = errors.New("period is too large")
	ErrRateTooHigh    = errors.New("count is too large for period: less than 1 ns between requests")
	ErrBurstTooLarge  = errors.New("max_burst is too large for this rate: (max_burst+1)*period/count exceeds 2^61 ns (73 years)")
)

// GCRAParams are the CL.THROTTLE arguments: Count requests per Period, with a
// burst of MaxBurst+1.
type GCRAParams struct {
	MaxBurst int64 // >= 0
	Count    int64 // >= 1, requests per Period
	Period   int64 // ns, >= 1
}

// Validate rejects what redis-cell would either divide by zero on or silently
// wrap. Once it passes, EmissionInterval()*Limit() <= MaxDuration, so no
// product of the emission interval and an admissible quantity can overflow.
func (p GCRAParams) Validate() error {
	switch {
	case p.MaxBurst < 0:
		return ErrBurstNegative
	case p.Count < 1:
		return ErrCountRange
	case p.Period < 1:
		return ErrPeriodRange
	case p.Period > MaxDuration:
		return ErrPeriodTooLarge
	}
	ei := p.Period / p.Count
	if ei == 0 {
		return ErrRateTooHigh
	}
	// ei*(MaxBurst+1) <= MaxDuration, written so that neither the product
	// nor MaxBurst+1 is ever computed out of range.
	if p.MaxBurst >= MaxDuration/ei {
		return ErrBurstTooLarge
	}
	return nil
}

// EmissionInterval is the nominal spacing between requests. Integer division
// matches redis-cell's float division followed by truncation for every period
// below 2^53 ns (104 days), and stays deterministic beyond.
func (p GCRAParams) EmissionInterval() int64 { return p.Period / p.Count }

// Limit is the burst size, as reported in the reply's second field.
func (p GCRAParams) Limit() int64 { return p.MaxBurst + 1 }

// GCRADecide reproduces redis-cell's rate_limit for one request of quantity
// units at now. tat is the stored theoretical arrival time; present=false means
// there is no live state. newTAT is to be stored (and is also the key's
// absolute reset timestamp) only when write is true: a limited request and a
// peek (quantity 0) change nothing. p must have passed Validate; a negative
// quantity is treated as a peek.
//
// One deliberate difference from redis-cell: remaining is computed in
// nanoseconds where redis-cell truncates both operands to microseconds first.
// For emission intervals that are not whole microseconds redis-cell can report
// one more remaining than a request could actually use; here remaining >= q
// holds exactly when a request of q units would be allowed.
func GCRADecide(tat int64, present bool, p GCRAParams, quantity, now int64) (newTAT int64, write bool, d Decision) {
	now = max(now, 0)
	ei := p.EmissionInterval()
	limit := p.Limit()
	dvt := ei * limit
	if quantity < 0 {
		quantity = 0
	}
	// An absent key, or one whose TAT has passed, behaves as if TAT were now:
	// the bucket is full and idle time earns no extra credit.
	base := now
	if present && tat > now {
		base = tat
	}
	d = Decision{Limit: limit, RetryAfter: -1}
	if quantity > limit {
		// Its increment exceeds the tolerance, so it can never pass.
		// Deciding this before multiplying keeps ei*quantity in range.
		d.Limited = true
		d.ResetAfter = base - now
		d.Remaining = gcraRemaining(dvt, d.ResetAfter, ei)
		return tat, false, d
	}
	newTAT = addSat(base, ei*quantity)
	allowAt := newTAT - dvt
	if now < allowAt {
		d.Limited = true
		d.RetryAfter = allowAt - now
		d.ResetAfter = base - now
		d.Remaining = gcraRemaining(dvt, d.ResetAfter, ei)
		return tat, false, d
	}
	d.ResetAfter = newTAT - now
	d.Remaining = gcraRemaining(dvt, d.ResetAfter, ei)
	return newTAT, quantity > 0, d
}

// gcraRemaining is how many whole emission intervals of slack the tolerance
// still has once ttl is spent.
func gcraRemaining(dvt, ttl, ei int64) int64 {
	if ttl >= dvt {
		return 0
	}
	return (dvt - ttl) / ei
}

// GCRARefund gives back amount units by moving the TAT earlier by amount
// emission intervals, but never before now: a refund cannot raise the budget
// above full. live is false when nothing remains to store (the key is full
// and can be deleted). p must have passed Validate; a negative amount refunds
// nothing.
func GCRARefund(tat int64, p GCRAParams, amount, now int64) (newTAT int64, live bool) {
	now = max(now, 0)
	if tat <= now {
		return now, false
	}
	ei := p.EmissionInterval()
	if amount <= 0 {
		return tat, true
	}
	// Comparing against the whole intervals left avoids forming
	// amount*ei, which can overflow for a large amount.
	if amount > (tat-now)/ei {
		return now, false
	}
	newTAT = tat - amount*ei
	return newTAT, newTAT > now
}

// GCRARemaining is the remaining a peek would report, for LIMIT.INFO and the
// LIMIT.REFUND reply.
func GCRARemaining(tat int64, present bool, p GCRAParams, now int64) int64 {
	_, _, d := GCRADecide(tat, present, p, 0, now)
	return d.Remaining
}

// addSat adds a non-negative span to a time, pinning at the int64 maximum
// instead of wrapping. Valid state never comes near it; it makes corrupt
// state harmless rather than catastrophic.
func addSat(t, span int64) int64 {
	if t > 1<<63-1-span {
		return 1<<63 - 1
	}
	return t + span
}
