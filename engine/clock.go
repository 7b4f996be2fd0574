package engine

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

// ErrClockBackwards: DEBUG CLOCK SET may not move time behind a now that a
// decision has already used.
var ErrClockBackwards = errors.New("the clock cannot go backwards")

// NewClock returns a clock reading wall (nil means the system clock).
func NewClock(wall func() int64) *Clock {
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
		return ErrClockBackwards
	}
	c.manual, c.fixed = true, t
	return nil
}

// Advance moves the clock forward by d, freezing it if it was running.
func (c *Clock) Advance(d int64) error {
	if d < 0 {
		return ErrClockBackwards
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	base := c.fixed
	if !c.manual {
		base = max(c.wall(), c.last)
	}
	if base > MaxTime-d {
		return ErrExpireTime
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

// MaxTime bounds timestamps so that adding ratelimit.MaxDuration never overflows.
const MaxTime = 1<<63 - 1 - ratelimit.MaxDuration
