// Package clock is Sluice's one source of "now": a clock that never runs
// backwards and that tests can freeze and move by hand (DEBUG CLOCK). The
// engine reads no clock; the server stamps each pipeline from one of these,
// and persistence and replication carry the time they restore or apply
// forward into it, so no later reading falls behind a time already used.
// A Clock is safe for concurrent use.
package clock

import (
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

// Clock is the server's one source of "now", in unix nanoseconds. It never
// runs backwards: every reading is at least the previous one, so a wall
// clock step back (NTP) cannot refill buckets or reopen windows. For tests it
// can be frozen at a chosen time and advanced by hand (DEBUG CLOCK).
// Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	last   int64
	manual bool  // frozen at fixed until Advance/Set/Real
	fixed  int64 // unix ns while manual
	wall   func() int64
}

// Errors from moving the clock by hand.
var (
	// ErrBackwards: DEBUG CLOCK SET may not move time behind a now that a
	// decision has already used.
	ErrBackwards = errors.New("the clock cannot go backwards")
	// ErrTooFar: the clock may not pass Max.
	ErrTooFar = errors.New("invalid expire time")
)

// New returns a clock reading wall (nil means the system clock).
func New(wall func() int64) *Clock {
	if wall == nil {
		wall = func() int64 { return time.Now().UnixNano() }
	}
	return &Clock{wall: wall}
}

// Now returns the current time, clamped to be no earlier than any previous
// reading.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	t := c.fixed
	if !c.manual {
		t = c.wall()
	}
	if t < c.last {
		t = c.last
	}
	c.last = t
	c.mu.Unlock()
	return t
}

// Observe makes sure no later reading is earlier than t: replaying a
// journal or loading a snapshot carries the old process's time forward.
func (c *Clock) Observe(t int64) {
	c.mu.Lock()
	c.last = max(c.last, t)
	c.mu.Unlock()
}

// Set freezes the clock at t.
func (c *Clock) Set(t int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t < c.last {
		return ErrBackwards
	}
	c.manual, c.fixed = true, t
	return nil
}

// Advance moves the clock forward by d, freezing it if it was running.
func (c *Clock) Advance(d int64) error {
	if d < 0 {
		return ErrBackwards
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	base := c.fixed
	if !c.manual {
		base = max(c.wall(), c.last)
	}
	if base > Max-d {
		return ErrTooFar
	}
	c.manual, c.fixed = true, base+d
	return nil
}

// Real returns the clock to wall time (still clamped: it stands still until
// the wall clock passes the last reading).
func (c *Clock) Real() {
	c.mu.Lock()
	c.manual = false
	c.mu.Unlock()
}

// Manual reports whether the clock is frozen by DEBUG CLOCK.
func (c *Clock) Manual() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.manual
}

// Max bounds timestamps so that adding ratelimit.MaxDuration, the longest
// period or window, never overflows.
const Max = 1<<63 - 1 - ratelimit.MaxDuration
