package clientlib

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Family names a limiting algorithm. String returns the name the server's
// TYPE and LIMIT.INFO report.
type Family uint8

// The four algorithms the server offers.
const (
	// FamilyGCRA is CL.THROTTLE: a token bucket with a separate burst,
	// smooth and memory-constant.
	FamilyGCRA Family = iota
	// FamilySlidingWindow is SW.CHECK: the two-counter estimate,
	// memory-constant, overshoot at most ~1% at a window boundary.
	FamilySlidingWindow
	// FamilySlidingLog is SL.CHECK: exact over any rolling window; memory
	// grows with the limit (at most 65000).
	FamilySlidingLog
	// FamilyFixedWindow is FW.CHECK: the classic counter, with its up-to-2x
	// burst across a window boundary.
	FamilyFixedWindow
)

var familyNames = [...]string{"gcra", "sliding-window", "sliding-log", "fixed-window"}

// Decision command names, as sent. Constants box into interfaces without
// allocating.
const (
	cmdThrottle = "CL.THROTTLE"
	cmdSW       = "SW.CHECK"
	cmdSL       = "SL.CHECK"
	cmdFW       = "FW.CHECK"
)

func (f Family) String() string {
	if int(f) < len(familyNames) {
		return familyNames[f]
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

func (f Family) command() string {
	switch f {
	case FamilySlidingWindow:
		return cmdSW
	case FamilySlidingLog:
		return cmdSL
	case FamilyFixedWindow:
		return cmdFW
	}
	return cmdThrottle
}

func parseFamily(s string) (Family, bool) {
	for i, n := range familyNames {
		if n == s {
			return Family(i), true
		}
	}
	return 0, false
}

// Limit describes one limit. For GCRA it reads "Rate per Period, Burst";
// for the window families, "at most Rate per Period (the window)".
//
// GCRA follows redis-cell: CL.THROTTLE's count is Rate, its period is
// Period, and its max_burst is Burst-1, because redis-cell admits
// max_burst+1 at once. Burst is what the server reports as the limit.
type Limit struct {
	Family Family
	// Rate is GCRA's count per Period, or a window's limit. At least 1.
	Rate int64
	// Period is GCRA's period or the window's length. Positive; sent as
	// decimal seconds, so sub-second precision survives ("0.5").
	Period time.Duration
	// Burst is GCRA's bucket size: how many units may pass at once. 0 means
	// Rate. Window families ignore it.
	Burst int64
}

// GCRA returns a GCRA limit of rate per period with a bucket of burst units.
func GCRA(rate int64, period time.Duration, burst int64) Limit {
	return Limit{Family: FamilyGCRA, Rate: rate, Period: period, Burst: burst}
}

// PerSecond is GCRA(rate, time.Second, rate), as in go-redis/redis_rate.
func PerSecond(rate int64) Limit { return GCRA(rate, time.Second, rate) }

// PerMinute is GCRA(rate, time.Minute, rate).
func PerMinute(rate int64) Limit { return GCRA(rate, time.Minute, rate) }

// PerHour is GCRA(rate, time.Hour, rate).
func PerHour(rate int64) Limit { return GCRA(rate, time.Hour, rate) }

// SlidingWindow returns a sliding-window-counter limit: at most limit units
// per window, estimated.
func SlidingWindow(limit int64, window time.Duration) Limit {
	return Limit{Family: FamilySlidingWindow, Rate: limit, Period: window}
}

// SlidingLog returns an exact sliding-log limit: at most limit units in any
// rolling window.
func SlidingLog(limit int64, window time.Duration) Limit {
	return Limit{Family: FamilySlidingLog, Rate: limit, Period: window}
}

// FixedWindow returns a fixed-window limit aligned to the epoch.
func FixedWindow(limit int64, window time.Duration) Limit {
	return Limit{Family: FamilyFixedWindow, Rate: limit, Period: window}
}

// Max is the limit the server reports in a decision's second field: Burst
// for GCRA, Rate for the window families.
func (l Limit) Max() int64 {
	if l.Family == FamilyGCRA {
		return l.burst()
	}
	return l.Rate
}

func (l Limit) burst() int64 {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// Window is the span one full quota covers, for RateLimit-Policy's w: the
// window for window families, and for GCRA the time an empty bucket takes to
// refill (Burst * Period / Rate).
func (l Limit) Window() time.Duration {
	if l.Family != FamilyGCRA {
		return l.Period
	}
	// Floats: the product can exceed int64 and a header needs no precision.
	w := float64(l.burst()) * float64(l.Period) / float64(l.Rate)
	if w > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(w)
}

func (l Limit) String() string {
	if l.Family == FamilyGCRA {
		return fmt.Sprintf("gcra %d per %s, burst %d", l.Rate, l.Period, l.burst())
	}
	return fmt.Sprintf("%s %d per %s", l.Family, l.Rate, l.Period)
}

// ErrInvalidLimit is wrapped by the errors for limits and costs rejected
// before anything is sent. The server would refuse them too; checking here
// also keeps the fallback limiter away from a division by zero.
var ErrInvalidLimit = errors.New("clientlib: invalid limit")

func (l Limit) validate() error {
	if l.Family > FamilyFixedWindow {
		return fmt.Errorf("%w: unknown family %d", ErrInvalidLimit, l.Family)
	}
	if l.Family == FamilyGCRA && l.Burst < 0 {
		return fmt.Errorf("%w: burst %d must not be negative", ErrInvalidLimit, l.Burst)
	}
	// The server's own checks, so that nothing it would refuse is sent and
	// the fallback's arithmetic cannot divide by zero or overflow.
	var err error
	if l.Family == FamilyGCRA {
		err = gcraParams(l).Validate()
	} else {
		err = windowParams(l).Validate()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidLimit, l, err)
	}
	return nil
}

// hash identifies the limit's parameters for the over-limit cache, mixed so
// that limits differing in any field land far apart.
func (l Limit) hash() uint64 {
	h := uint64(l.Family) + 1
	h = mix(h ^ uint64(l.Rate))
	h = mix(h ^ uint64(l.Period))
	h = mix(h ^ uint64(l.burst()))
	return h
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// appendSeconds writes d as decimal seconds with up to nine fractional
// digits, exactly: the server parses the same form without floats, so 0.1s
// arrives as exactly 100000000ns.
func appendSeconds(b []byte, d time.Duration) []byte {
	ns := int64(d)
	b = strconv.AppendInt(b, ns/1e9, 10)
	frac := ns % 1e9
	if frac == 0 {
		return b
	}
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// args appends the decision command for this limit, cost included, with the
// MS flag, boxed the ordinary way. LIMIT.ALL uses it; the single-limit path
// has an allocation-free variant in wire.go.
func (l Limit) args(dst []interface{}, key string, cost int64) []interface{} {
	period := string(appendSeconds(nil, l.Period))
	if l.Family == FamilyGCRA {
		return append(dst, cmdThrottle, key, l.burst()-1, l.Rate, period, cost, "MS")
	}
	return append(dst, l.Family.command(), key, l.Rate, period, cost, "MS")
}
