package ratelimit

import (
	"errors"
	"math/bits"
)

// Window parameter errors name the argument at fault.
var (
	ErrLimitRange     = errors.New("limit must be at least 1")
	ErrWindowRange    = errors.New("window must be positive")
	ErrWindowTooLarge = errors.New("window is too large")
)

// WindowParams are the arguments of SW.CHECK, SL.CHECK and FW.CHECK.
type WindowParams struct {
	Limit  int64 // >= 1
	Window int64 // ns, >= 1, <= MaxDuration
}

// Validate keeps Window away from zero (every algorithm divides by it) and
// within MaxDuration (they add two windows to now).
func (p WindowParams) Validate() error {
	switch {
	case p.Limit < 1:
		return ErrLimitRange
	case p.Window < 1:
		return ErrWindowRange
	case p.Window > MaxDuration:
		return ErrWindowTooLarge
	}
	return nil
}

// windowStart aligns now down to a multiple of w since the epoch, so that
// every node and every restart agrees on where windows begin.
func windowStart(now, w int64) int64 { return now - now%w }

// SWState is the sliding window counter's stored state: the counts of the
// window that starts at Start and of the one before it.
type SWState struct {
	Start int64 // start of the current window, a multiple of Window
	Cur   int64
	Prev  int64
}

// swRoll moves s forward to the window containing now. State written under a
// different window length (misaligned, or apparently from the future) is
// treated as expired, as are windows that ended more than one window ago.
func swRoll(s SWState, present bool, w, now int64) SWState {
	ws := windowStart(now, w)
	if !present {
		return SWState{Start: ws}
	}
	cur, prev := max(s.Cur, 0), max(s.Prev, 0)
	switch {
	case s.Start == ws:
		return SWState{Start: ws, Cur: cur, Prev: prev}
	case s.Start == ws-w:
		return SWState{Start: ws, Prev: cur}
	}
	return SWState{Start: ws}
}

// u128 is an unsigned 128-bit integer. The estimate prev*(W-elapsed)/W + cur
// is compared multiplied through by W, and those products reach 2^126.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

func (x u128) less(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo)
}

// div64 returns floor(x/y). The caller guarantees the quotient fits in 64
// bits (x.hi < y), which bits.Div64 would otherwise panic on.
func (x u128) div64(y uint64) uint64 {
	q, _ := bits.Div64(x.hi, x.lo, y)
	return q
}

// swScaled is the estimate multiplied by w: prev*(w-elapsed) + cur*w.
// cur is unsigned so that cur+cost (each below 2^63) cannot overflow.
func swScaled(prev int64, cur uint64, w, elapsed int64) u128 {
	return mul64(uint64(prev), uint64(w-elapsed)).add(mul64(cur, uint64(w)))
}

// swRemaining is floor(limit - estimate), or 0 when the estimate has reached
// the limit. It is also the largest cost that would be allowed right now.
func swRemaining(s SWState, p WindowParams, elapsed int64) int64 {
	est := swScaled(s.Prev, uint64(s.Cur), p.Window, elapsed)
	lim := mul64(uint64(p.Limit), uint64(p.Window))
	if !est.less(lim) {
		return 0
	}
	// The quotient is below Limit, so it fits in 64 bits.
	return int64(lim.sub(est).div64(uint64(p.Window)))
}

// swResetAfter is the time until the estimate decays to zero: the current
// count weighs in until the end of the next window, the previous one until
// the end of this window.
func swResetAfter(s SWState, w, elapsed int64) int64 {
	switch {
	case s.Cur > 0:
		return 2*w - elapsed
	case s.Prev > 0:
		return w - elapsed
	}
	return 0
}

// SWDecide runs one SW.CHECK at now. Allowed when estimate+cost <= Limit,
// compared exactly in integers: rounding the estimate either way would hand
// out or withhold a unit at window boundaries. next and resetAt (the key's
// absolute reset timestamp) are to be stored only when write is true: a
// limited check and a peek (cost 0) change nothing. p must have passed
// Validate; a negative cost is treated as a peek.
//
// RetryAfter is the exact earliest moment, in whole nanoseconds, at which the
// same cost would be allowed if nothing else arrived: still limited one
// nanosecond before, allowed at it. The estimate never rises without
// arrivals, so that moment is well defined.
func SWDecide(s SWState, present bool, p WindowParams, cost, now int64) (next SWState, resetAt int64, write bool, d Decision) {
	now = max(now, 0)
	w := p.Window
	s = swRoll(s, present, w, now)
	elapsed := now - s.Start
	cost = max(cost, 0)
	d = Decision{Limit: p.Limit, RetryAfter: -1}
	if cost > p.Limit {
		d.Limited = true
	} else if est := swScaled(s.Prev, uint64(s.Cur)+uint64(cost), w, elapsed); mul64(uint64(p.Limit), uint64(w)).less(est) {
		d.Limited = true
		d.RetryAfter = swRetryAfter(s, p, cost, elapsed)
	} else if cost > 0 {
		s.Cur += cost
		write = true
	}
	d.Remaining = swRemaining(s, p, elapsed)
	d.ResetAfter = swResetAfter(s, w, elapsed)
	return s, addSat(now, d.ResetAfter), write, d
}

// swRetryAfter finds when a limited cost (<= Limit) fits, looking at three
// spans in turn: the rest of this window, where the previous count decays;
// the next window, where this window's count decays; and the one after, where
// both are gone.
func swRetryAfter(s SWState, p WindowParams, cost, elapsed int64) int64 {
	w := p.Window
	// This window: prev*(w-e) <= (limit-cur-cost)*w. With prev == 0 the
	// estimate cannot fall here, and the cost was just refused.
	if r := p.Limit - s.Cur - cost; r >= 0 && s.Prev > r {
		// r < prev keeps r*w/prev below w, so the quotient fits; and since
		// the check failed at elapsed, e >= elapsed.
		e := w - int64(mul64(uint64(r), uint64(w)).div64(uint64(s.Prev)))
		if e < w {
			return e - elapsed
		}
	}
	// Next window: cur*(w-e) <= (limit-cost)*w.
	untilNext := w - elapsed
	r := p.Limit - cost
	if s.Cur <= r {
		return untilNext
	}
	if e := w - int64(mul64(uint64(r), uint64(w)).div64(uint64(s.Cur))); e < w {
		return untilNext + e
	}
	// The window after: both counts have aged out.
	return untilNext + w
}

// SWRefund gives back amount units at now, from the current window first and
// then from the previous one, never below zero. live is false when nothing
// remains to store. The caller passes only live state. A negative amount
// refunds nothing.
func SWRefund(s SWState, p WindowParams, amount, now int64) (next SWState, resetAt int64, live bool) {
	now = max(now, 0)
	s = swRoll(s, true, p.Window, now)
	amount = max(amount, 0)
	take := min(amount, s.Cur)
	s.Cur -= take
	s.Prev -= min(amount-take, s.Prev)
	ra := swResetAfter(s, p.Window, now-s.Start)
	return s, addSat(now, ra), ra > 0
}

// SWRemaining is the remaining a peek would report, for LIMIT.INFO and the
// LIMIT.REFUND reply.
func SWRemaining(s SWState, present bool, p WindowParams, now int64) int64 {
	_, _, _, d := SWDecide(s, present, p, 0, now)
	return d.Remaining
}
