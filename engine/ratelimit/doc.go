// Package ratelimit holds the rate-limit algorithms as pure functions:
// GCRA (redis-cell's CL.THROTTLE), the sliding window counter, the exact
// sliding log and the fixed window, each as Decide, Refund and Remaining
// over a small state value and an explicit now. They read no clock, keep no
// state and allocate nothing, so the engine (over its stored records) and
// clientlib's in-process fallback (over its own table) run the same
// arithmetic. Integers only: float results could differ between machines.
package ratelimit

// MaxDuration bounds every period and window, and every span derived from one
// (an emission interval times a burst, two windows), so that now plus any span
// stays far from the int64 limit for the next century of Unix time: 1<<61 ns,
// about 73 years.
const MaxDuration int64 = 1 << 61
