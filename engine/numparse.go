package engine

import (
	"errors"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// ErrNotInteger carries Redis's own wording, so clients that match on it keep
// working.
var ErrNotInteger = errors.New("value is not an integer or out of range")

// Duration errors are phrased to follow the argument's name in a reply, as in
// "ERR period '1e3' is not a valid number of seconds".
var (
	ErrDurationSyntax    = errors.New("is not a valid number of seconds")
	ErrDurationNegative  = errors.New("must not be negative")
	ErrDurationPrecision = errors.New("has more than 9 decimal places")
	ErrDurationRange     = errors.New("is too large")
)

// ParseInt64 parses a decimal integer exactly as Redis's string2ll does: an
// optional '-', then digits with no leading zero (only "0" itself may start
// with one), nothing else. Rejecting "+1", " 1", "01" and "-0" keeps the
// accepted text canonical, so a value and its spelling map one to one.
func ParseInt64(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, ErrNotInteger
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, nil
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, ErrNotInteger
	}
	const maxU = ^uint64(0)
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrNotInteger
		}
		d := uint64(c - '0')
		if v > maxU/10 || v*10 > maxU-d {
			return 0, ErrNotInteger
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, ErrNotInteger
		}
		// Negating in uint64 reaches math.MinInt64, whose magnitude has no
		// positive int64.
		return int64(-v), nil
	}
	if v > 1<<63-1 {
		return 0, ErrNotInteger
	}
	return int64(v), nil
}

// maxWholeSeconds is the largest integer part that can still fit under
// ratelimit.MaxDuration; past it the accumulator stops growing so it cannot wrap.
const maxWholeSeconds = ratelimit.MaxDuration / 1e9

// ParseDurationSeconds parses a plain decimal number of seconds into exact
// nanoseconds: digits, optionally a '.' and up to 9 more digits ("60", "0.5",
// ".5", "1.", "007.250"). Floats are never involved, so "0.1" is exactly
// 100000000 ns on every machine. Signs, exponents, spaces, "inf" and "nan" are
// rejected; at least one digit is required. Zero is accepted: callers that
// need a positive span say so in their own validation.
func ParseDurationSeconds(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var whole, frac int64
	digits, fracDigits := 0, 0
	tooLarge, tooPrecise, dot := false, false, false
	for _, c := range b {
		switch {
		case c == '.' && !dot:
			dot = true
		case c >= '0' && c <= '9':
			digits++
			d := int64(c - '0')
			if dot {
				if fracDigits == 9 {
					tooPrecise = true
					continue
				}
				frac = frac*10 + d
				fracDigits++
				continue
			}
			if whole > maxWholeSeconds {
				tooLarge = true
				continue
			}
			whole = whole*10 + d
		default:
			return 0, ErrDurationSyntax
		}
	}
	switch {
	case digits == 0:
		return 0, ErrDurationSyntax
	case neg:
		return 0, ErrDurationNegative
	case tooPrecise:
		return 0, ErrDurationPrecision
	case tooLarge || whole > maxWholeSeconds:
		return 0, ErrDurationRange
	}
	for i := fracDigits; i < 9; i++ {
		frac *= 10
	}
	ns := whole*1e9 + frac
	if ns > ratelimit.MaxDuration {
		return 0, ErrDurationRange
	}
	return ns, nil
}

// SecondsRoundedUp converts a reply duration to whole seconds the way
// redis-cell v0.4+ does: a sub-second part of at least 1 ms adds a second, so a
// client that sleeps for the reported time does not come back early, while
// nanosecond noise does not inflate the answer. A negative value is the -1
// sentinel ("never" or "not limited") and stays -1.
func SecondsRoundedUp(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	s := ns / 1e9
	if ns%1e9 >= 1e6 {
		s++
	}
	return s
}

// MillisRoundedUp converts a reply duration to whole milliseconds, rounding any
// remainder up so the reported wait is never too short. A negative value is
// the -1 sentinel and stays -1.
func MillisRoundedUp(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	ms := ns / 1e6
	if ns%1e6 != 0 {
		ms++
	}
	return ms
}
