package clientlib

import "time"

// WithClock replaces time.Now for the over-limit cache and the fallback
// limiter, so that tests move local time by hand, as the server's DEBUG
// CLOCK moves server time.
func WithClock(now func() time.Time) Option { return func(l *Limiter) { l.clock = now } }

// FallbackLen is how many entries the fallback limiter holds.
func FallbackLen(l *Limiter) int {
	l.fallback.mu.Lock()
	defer l.fallback.mu.Unlock()
	return len(l.fallback.index)
}

// WithMaxStuck lowers the bound on abandoned in-flight commands.
func WithMaxStuck(n int64) Option { return func(l *Limiter) { l.maxStuck = n } }
