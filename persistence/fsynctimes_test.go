package persistence

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestFsyncTimesBuckets: each duration lands in the first bucket whose
// bound it does not pass, the counts are cumulative, and the sum is the
// durations' total.
func TestFsyncTimesBuckets(t *testing.T) {
	var h FsyncTimes
	for _, d := range []time.Duration{10 * time.Microsecond, 50 * time.Microsecond, 51 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second} {
		h.Observe(d)
	}
	bounds, cum, count, sum := h.Buckets()
	if len(bounds) != len(cum) || bounds[0] != 50e-6 || bounds[len(bounds)-1] != 1 {
		t.Fatalf("bounds %v", bounds)
	}
	want := map[float64]uint64{50e-6: 2, 100e-6: 3, 2.5e-3: 3, 5e-3: 4, 1: 4}
	for i, b := range bounds {
		if w, ok := want[b]; ok && cum[i] != w {
			t.Errorf("bucket le=%v: %d, want %d", b, cum[i], w)
		}
		if i > 0 && cum[i] < cum[i-1] {
			t.Errorf("bucket le=%v: %d after %d: not cumulative", b, cum[i], cum[i-1])
		}
	}
	if count != 5 {
		t.Errorf("count %d, want 5 (one over the top bound)", count)
	}
	if wantSum := (10e-6 + 50e-6 + 51e-6 + 3e-3 + 2); sum < wantSum-1e-9 || sum > wantSum+1e-9 {
		t.Errorf("sum %v, want %v", sum, wantSum)
	}
}

// TestDurableTimesEveryFsync: under appendfsync always every write is
// fsynced and timed, before and after a snapshot rotates the log to a new
// generation (the histogram is the Durable's, not one log's).
func TestDurableTimesEveryFsync(t *testing.T) {
	d, eng, clk := durableAt(t, t.TempDir(), FsyncAlways)
	defer eng.Close()
	defer d.Close()
	timed := func() uint64 {
		_, _, count, _ := d.FsyncHistogram()
		return count
	}
	for i := range 20 {
		if i == 10 {
			if err := d.Save(); err != nil {
				t.Fatal(err)
			}
		}
		before := timed()
		b := &engine.Batch{Cmds: []engine.Command{throttle("k"+strconv.Itoa(i), 1)}}
		d.Execute(b, clk.Now())
		if after := timed(); after <= before {
			t.Fatalf("write %d under always: %d fsyncs timed before, %d after", i, before, after)
		}
	}
	_, cum, count, sum := d.FsyncHistogram()
	if cum[len(cum)-1] > count || sum <= 0 {
		t.Errorf("top bucket %d of %d, sum %v", cum[len(cum)-1], count, sum)
	}
}

// BenchmarkFsyncTimed is what timing adds to one fsync, on and off in one
// run: timedSync on a file whose fsync is free, so the two clock reads
// and the bucket's atomic add are all there is to see. (A real fsync
// takes 50 us or more; the Log's writer calls it once per batch of
// records, never once per decision.)
func BenchmarkFsyncTimed(b *testing.B) {
	f, err := openDiscard(filepath.Join(b.TempDir(), "bench.aof"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, timed := range []bool{false, true} {
		b.Run("timed="+strconv.FormatBool(timed), func(b *testing.B) {
			var h *FsyncTimes
			if timed {
				h = &FsyncTimes{}
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := timedSync(f, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
