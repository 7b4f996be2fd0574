package ratelimit

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestGCRAValidate(t *testing.T) {
	ok := GCRAParams{MaxBurst: 4, Count: 1, Period: 1e9}
	tests := []struct {
		name string
		p    GCRAParams
		want error
	}{
		{"ok", ok, nil},
		{"zero burst", GCRAParams{0, 1, 1}, nil},
		{"negative burst", GCRAParams{-1, 1, 1e9}, ErrBurstNegative},
		{"zero count", GCRAParams{1, 0, 1e9}, ErrCountRange},
		{"negative count", GCRAParams{1, -5, 1e9}, ErrCountRange},
		{"zero period", GCRAParams{1, 1, 0}, ErrPeriodRange},
		{"negative period", GCRAParams{1, 1, -1}, ErrPeriodRange},
		{"period too large", GCRAParams{0, 1, MaxDuration + 1}, ErrPeriodTooLarge},
		{"rate finer than 1ns", GCRAParams{0, 1e9 + 1, 1e9}, ErrRateTooHigh},
		{"1ns rate", GCRAParams{0, 1e9, 1e9}, nil},
		{"tolerance exactly MaxDuration", GCRAParams{MaxDuration - 1, 1, 1}, nil},
		{"tolerance past MaxDuration", GCRAParams{MaxDuration, 1, 1}, ErrBurstTooLarge},
		{"burst max int64", GCRAParams{math.MaxInt64, 1, 1e9}, ErrBurstTooLarge},
		{"burst times interval overflows", GCRAParams{1 << 40, 1, 1 << 30}, ErrBurstTooLarge},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); !errors.Is(err, tt.want) {
			t.Errorf("%s: Validate(%+v) = %v, want %v", tt.name, tt.p, err, tt.want)
		}
	}
}

// TestGCRAExtremes drives the largest valid parameters with the largest
// costs: nothing may wrap, and every reply stays within its bounds.
func TestGCRAExtremes(t *testing.T) {
	params := []GCRAParams{
		{MaxBurst: MaxDuration - 1, Count: 1, Period: 1},
		{MaxBurst: 0, Count: 1, Period: MaxDuration},
		{MaxBurst: 1e9 - 1, Count: 1e9, Period: MaxDuration},
		{MaxBurst: 0, Count: 1e9, Period: 1e9},
	}
	nows := []int64{0, 1, 1_700_000_000e9, math.MaxInt64 - MaxDuration, math.MaxInt64 - 1, math.MaxInt64, -1, math.MinInt64}
	costs := []int64{0, 1, 2, 1 << 40, 1 << 61, 1 << 62, math.MaxInt64}
	for _, p := range params {
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		dvt := p.EmissionInterval() * p.Limit()
		for _, now := range nows {
			for _, tat := range []int64{0, now, now + 1, max(now, 0) + dvt, math.MaxInt64} {
				for _, q := range costs {
					newTAT, write, d := GCRADecide(tat, true, p, q, now)
					if d.Remaining < 0 || d.Remaining > p.Limit() || d.ResetAfter < 0 || d.RetryAfter < -1 {
						t.Fatalf("%+v tat=%d now=%d q=%d: %+v", p, tat, now, q, d)
					}
					if write && newTAT < max(now, 0) {
						t.Fatalf("%+v tat=%d now=%d q=%d: TAT went back to %d", p, tat, now, q, newTAT)
					}
					rt, live := GCRARefund(tat, p, q, now)
					if live && rt <= max(now, 0) || rt < max(now, 0) {
						t.Fatalf("refund %+v tat=%d now=%d q=%d: %d %v", p, tat, now, q, rt, live)
					}
				}
			}
		}
	}
}

// TestGCRAProperties checks, over random parameters and traffic, the
// contracts the replies promise: remaining is the largest quantity that would
// pass, retry_after is the exact first nanosecond at which the refused
// quantity passes, and reset_after is the exact first nanosecond at which the
// bucket is full.
func TestGCRAProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		p := GCRAParams{MaxBurst: r.Int64N(6), Count: 1 + r.Int64N(5), Period: 1 + r.Int64N(200)}
		if p.Validate() != nil {
			continue
		}
		ei, limit := p.EmissionInterval(), p.Limit()
		var tat, now int64
		present := false
		now = r.Int64N(1000)
		for range 200 {
			now += r.Int64N(3 * ei)
			if present && tat <= now {
				present = false
			}
			q := r.Int64N(limit + 2)
			newTAT, write, d := GCRADecide(tat, present, p, q, now)

			_, _, peek := GCRADecide(tat, present, p, 0, now)
			if peek.Limited || peek.Remaining != GCRARemaining(tat, present, p, now) {
				t.Fatalf("peek %+v", peek)
			}
			if want := q > peek.Remaining; d.Limited != want {
				t.Fatalf("%+v tat=%d/%v now=%d q=%d: limited=%v but remaining before was %d", p, tat, present, now, q, d.Limited, peek.Remaining)
			}
			if write != (!d.Limited && q > 0) {
				t.Fatalf("write=%v for %+v q=%d", write, d, q)
			}
			if d.Limited && q <= limit {
				if d.RetryAfter <= 0 {
					t.Fatalf("limited with retry_after %d", d.RetryAfter)
				}
				if _, _, e := GCRADecide(tat, present, p, q, now+d.RetryAfter); e.Limited {
					t.Fatalf("%+v tat=%d now=%d q=%d: still limited at retry_after %d", p, tat, now, q, d.RetryAfter)
				}
				if _, _, e := GCRADecide(tat, present, p, q, now+d.RetryAfter-1); !e.Limited {
					t.Fatalf("%+v tat=%d now=%d q=%d: allowed before retry_after %d", p, tat, now, q, d.RetryAfter)
				}
			} else if d.RetryAfter != -1 {
				t.Fatalf("retry_after %d, want -1: %+v", d.RetryAfter, d)
			}
			if write {
				// Consuming and refunding the same amount restores the
				// previous state exactly, absent included.
				rt, live := GCRARefund(newTAT, p, q, now)
				if live != present || (present && rt != tat) {
					t.Fatalf("refund round trip: had %d/%v, got %d/%v", tat, present, rt, live)
				}
				tat, present = newTAT, true
			}
			if present {
				if d.ResetAfter != tat-now {
					t.Fatalf("reset_after %d, TAT-now %d", d.ResetAfter, tat-now)
				}
				if got := GCRARemaining(tat, true, p, now+d.ResetAfter); got != limit {
					t.Fatalf("not full at reset_after: %d", got)
				}
				if got := GCRARemaining(tat, true, p, now+d.ResetAfter-1); got == limit {
					t.Fatalf("already full before reset_after")
				}
			} else if d.ResetAfter != 0 {
				t.Fatalf("reset_after %d with no state", d.ResetAfter)
			}
			if r.IntN(8) == 0 && present {
				amount := r.Int64N(limit + 2)
				before := GCRARemaining(tat, true, p, now)
				rt, live := GCRARefund(tat, p, amount, now)
				after := GCRARemaining(rt, live, p, now)
				if after != min(limit, before+amount) {
					t.Fatalf("refund %d: remaining %d -> %d", amount, before, after)
				}
				tat, present = rt, live
			}
		}
	}
}

// TestGCRARefundClamp checks that a refund never lifts the budget above
// full, however large.
func TestGCRARefundClamp(t *testing.T) {
	p := GCRAParams{MaxBurst: 9, Count: 10, Period: 60e9}
	now := int64(1_000e9)
	tat, _, _ := GCRADecide(0, false, p, 3, now)
	if rt, live := GCRARefund(tat, p, math.MaxInt64, now); live || rt != now {
		t.Fatalf("got %d/%v, want %d/false", rt, live, now)
	}
	if rt, live := GCRARefund(tat, p, 1, now); !live || rt != tat-p.EmissionInterval() {
		t.Fatalf("got %d/%v", rt, live)
	}
	if rt, live := GCRARefund(tat, p, 0, now); !live || rt != tat {
		t.Fatalf("zero refund changed state: %d/%v", rt, live)
	}
	if _, live := GCRARefund(now, p, 1, now); live {
		t.Fatal("refund on expired state revived it")
	}
}

func TestGCRAAllocs(t *testing.T) {
	p := GCRAParams{MaxBurst: 9, Count: 10, Period: 60e9}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		tat, _, d := GCRADecide(5e9, true, p, 1, 1e9)
		tat, _ = GCRARefund(tat, p, 1, 1e9)
		sink += tat + d.Remaining + GCRARemaining(tat, true, p, 1e9)
		if p.Validate() != nil {
			sink++
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	_ = sink
}

func BenchmarkGCRADecide(b *testing.B) {
	p := GCRAParams{MaxBurst: 99, Count: 100, Period: 60e9}
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		var tat int64
		now := int64(1_700_000_000e9)
		for b.Loop() {
			// One request per emission interval: always allowed.
			now += p.EmissionInterval()
			tat, _, _ = GCRADecide(tat, true, p, 1, now)
		}
	})
	b.Run("limited", func(b *testing.B) {
		b.ReportAllocs()
		now := int64(1_700_000_000e9)
		tat := now + p.EmissionInterval()*p.Limit()
		var d Decision
		for b.Loop() {
			_, _, d = GCRADecide(tat, true, p, 1, now)
		}
		if !d.Limited {
			b.Fatal("not limited")
		}
	})
}
