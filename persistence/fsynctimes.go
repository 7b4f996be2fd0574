package persistence

import (
	"sync/atomic"
	"time"
)

// FsyncTimes is a histogram of how long the journal's fsync calls took,
// for sluice_fsync_duration_seconds. The goroutine that calls fsync
// observes it after the call returns, so no decision waits on it; readers
// take a copy at scrape time. Safe for concurrent use; the zero value is
// ready.
type FsyncTimes struct {
	counts [len(fsyncBounds) + 1]atomic.Uint64 // the last: over the top bound
	sumNs  atomic.Int64
}

// fsyncBounds are the upper bounds of FsyncTimes' buckets: from a fast
// NVMe fsync (tens of microseconds) to a stalled disk (a second), about
// three per decade.
var fsyncBounds = [...]time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}

// Observe records one fsync that took d.
func (h *FsyncTimes) Observe(d time.Duration) {
	i := 0
	for i < len(fsyncBounds) && d > fsyncBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Buckets returns the buckets' upper bounds in seconds, the cumulative
// count of fsyncs at or under each, the total count, and the summed
// duration in seconds: the shape of a Prometheus histogram. Read bucket by
// bucket while fsyncs go on, so the figures may be a moment apart; the
// cumulative counts never decrease.
func (h *FsyncTimes) Buckets() (bounds []float64, cumulative []uint64, count uint64, sumSeconds float64) {
	bounds = make([]float64, len(fsyncBounds))
	cumulative = make([]uint64, len(fsyncBounds))
	for i, b := range fsyncBounds {
		bounds[i] = b.Seconds()
		count += h.counts[i].Load()
		cumulative[i] = count
	}
	count += h.counts[len(fsyncBounds)].Load()
	return bounds, cumulative, count, time.Duration(h.sumNs.Load()).Seconds()
}

// timedSync is f.Sync, observed into h when h is set.
func timedSync(f file, h *FsyncTimes) error {
	if h == nil {
		return f.Sync()
	}
	start := time.Now()
	err := f.Sync()
	h.Observe(time.Since(start))
	return err
}
