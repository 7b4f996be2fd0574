package ratelimit

import "errors"

// The leaky bucket as a meter (LB.RESERVE): a smooth schedule of one unit
// every Interval, Burst units allowed to go at once. Like GCRA it keeps one
// absolute timestamp, the schedule's end (TAT: when every unit reserved so
// far has had its slot); unlike GCRA it does not refuse a request that
// comes early, it tells it when to go: a reservation of n units moves the
// end by n intervals, and its caller may go once at most Burst units of
// the schedule lie ahead of the end it made.

// Leaky-bucket parameter errors name the argument at fault.
var (
	ErrLBRate      = errors.New("rate must be at least 1")
	ErrLBBurst     = errors.New("burst must be at least 1")
	ErrLBTooFast   = errors.New("rate is too high for period: less than 1 ns per unit")
	ErrLBTooLarge  = errors.New("burst is too large for this rate: burst*period/rate exceeds 2^61 ns (73 years)")
	ErrLBScheduled = errors.New("the reservation would end more than 73 years ahead")
)

// LBParams are LB.RESERVE's schedule: one unit per Interval ns, Burst at
// once.
type LBParams struct {
	Interval int64 // ns per unit, >= 1
	Burst    int64 // >= 1
}

// LBInterval derives the schedule's interval from rate units per period ns
// (truncated: 3 per second is 333,333,333 ns apart).
func LBInterval(rate, period int64) (int64, error) {
	switch {
	case rate < 1:
		return 0, ErrLBRate
	case period < 1:
		return 0, ErrPeriodRange
	case period > MaxDuration:
		return 0, ErrPeriodTooLarge
	}
	iv := period / rate
	if iv == 0 {
		return 0, ErrLBTooFast
	}
	return iv, nil
}

// Validate bounds Burst*Interval so no product below overflows.
func (p LBParams) Validate() error {
	switch {
	case p.Interval < 1:
		return ErrLBTooFast
	case p.Burst < 1:
		return ErrLBBurst
	case p.Burst > MaxDuration/p.Interval:
		return ErrLBTooLarge
	}
	return nil
}

// LBReservation is LB.RESERVE's answer. Durations are ns.
type LBReservation struct {
	Admitted   bool
	Wait       int64 // until the caller may go; 0: now
	Ahead      int64 // units reserved before this one that may not go yet
	ResetAfter int64 // until the schedule is empty
}

// LBReserve reserves cost units at now on the schedule ending at tat (live
// false: no schedule, an idle bucket). maxWait < 0: no bound; otherwise a
// wait longer than maxWait reserves nothing and says how long it would
// have been. write reports whether newTAT must be stored.
func LBReserve(tat int64, live bool, p LBParams, cost, maxWait, now int64) (newTAT int64, write bool, r LBReservation, err error) {
	start := now
	if live && tat > now {
		start = tat
	}
	backlog := start - now
	if cost > (MaxDuration-backlog)/p.Interval {
		return 0, false, LBReservation{}, ErrLBScheduled
	}
	end := start + cost*p.Interval
	r.Wait = max(0, end-p.Burst*p.Interval-now)
	r.Ahead = max(0, ceilDiv(backlog, p.Interval)-p.Burst)
	if maxWait >= 0 && r.Wait > maxWait {
		r.ResetAfter = backlog
		return tat, false, r, nil
	}
	r.Admitted = true
	r.ResetAfter = end - now
	return end, cost > 0, r, nil
}

// LBCancel gives back n units of the schedule ending at tat; live false:
// the schedule is empty now.
func LBCancel(tat int64, p LBParams, n, now int64) (newTAT int64, live bool) {
	backlog := tat - now
	if n >= ceilDiv(backlog, p.Interval) {
		return 0, false
	}
	return tat - n*p.Interval, true
}

// LBScheduled is the units of the schedule still to come at now.
func LBScheduled(tat int64, p LBParams, now int64) int64 {
	return max(0, ceilDiv(tat-now, p.Interval))
}

// LBRemaining is the units that could go at now without waiting.
func LBRemaining(tat int64, p LBParams, now int64) int64 {
	return max(0, p.Burst-LBScheduled(tat, p, now))
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
