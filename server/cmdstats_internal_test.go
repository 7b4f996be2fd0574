package server

import "testing"

// The latency histogram's buckets: every duration falls in the bucket
// whose bounds hold it, buckets are at most 1/16 of their values wide, and
// each power of two of microseconds starts the bucket that the Prometheus
// buckets and LATENCY HISTOGRAM count up to ((k+7)*histSub for 2^k µs).
func TestLatencyHistogramBuckets(t *testing.T) {
	prev := 0
	for ns := int64(1); ns < 100e9; ns += max(ns/97, 1) {
		i := histIndex(ns)
		if i < prev {
			t.Fatalf("%d ns: bucket %d after %d", ns, i, prev)
		}
		prev = i
		if i == histBuckets-1 {
			continue // the last bucket takes everything longer
		}
		usec := float64(ns) / 1000
		hi := histUpperUsec(i)
		lo := 0.0
		if i > 0 {
			lo = histUpperUsec(i - 1)
		}
		if usec >= hi || usec < lo-1e-9 {
			t.Fatalf("%d ns in bucket %d [%g, %g) µs", ns, i, lo, hi)
		}
		if i >= 2*histSub && (hi-lo)/lo > 1.0/16+1e-9 {
			t.Fatalf("bucket %d [%g, %g) µs is wider than 1/16", i, lo, hi)
		}
	}
	for k := range promBuckets {
		ns := int64(1000) << k
		if got, want := histIndex(ns), (k+7)*histSub; got != want {
			t.Fatalf("2^%d µs: bucket %d, want %d", k, got, want)
		}
		if got := histIndex(ns - 1); got >= (k+7)*histSub {
			t.Fatalf("2^%d µs - 1 ns: bucket %d, not below %d", k, got, (k+7)*histSub)
		}
	}
}
