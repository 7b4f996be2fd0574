package ratelimit

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestWindowValidate(t *testing.T) {
	tests := []struct {
		p    WindowParams
		want error
	}{
		{WindowParams{1, 1}, nil},
		{WindowParams{math.MaxInt64, MaxDuration}, nil},
		{WindowParams{0, 1e9}, ErrLimitRange},
		{WindowParams{-1, 1e9}, ErrLimitRange},
		{WindowParams{1, 0}, ErrWindowRange},
		{WindowParams{1, -1}, ErrWindowRange},
		{WindowParams{1, MaxDuration + 1}, ErrWindowTooLarge},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); !errors.Is(err, tt.want) {
			t.Errorf("Validate(%+v) = %v, want %v", tt.p, err, tt.want)
		}
	}
}

// swModel is the sliding window counter written the obvious way: a count per
// aligned window and the estimate as an exact rational.
type swModel struct {
	w      int64
	counts map[int64]int64 // window index -> units admitted in it
}

func (m *swModel) est(t int64) *big.Rat {
	k, e := t/m.w, t%m.w
	prev := new(big.Rat).SetFrac64(m.counts[k-1]*(m.w-e), m.w)
	return prev.Add(prev, new(big.Rat).SetInt64(m.counts[k]))
}

func (m *swModel) fits(t, limit, cost int64) bool {
	x := m.est(t)
	return x.Add(x, new(big.Rat).SetInt64(cost)).Cmp(new(big.Rat).SetInt64(limit)) <= 0
}

// decide returns the reply the model expects, scanning forward one
// nanosecond at a time for retry_after and reset_after.
func (m *swModel) decide(limit, cost, now int64) Decision {
	d := Decision{Limit: limit, RetryAfter: -1}
	if cost <= limit && m.fits(now, limit, cost) {
		m.counts[now/m.w] += cost
	} else {
		d.Limited = true
		if cost <= limit {
			for t := now + 1; ; t++ {
				if m.fits(t, limit, cost) {
					d.RetryAfter = t - now
					break
				}
			}
		}
	}
	rem := new(big.Rat).Sub(new(big.Rat).SetInt64(limit), m.est(now))
	if rem.Sign() > 0 {
		d.Remaining = new(big.Int).Quo(rem.Num(), rem.Denom()).Int64()
	}
	for t := now; ; t++ {
		if m.est(t).Sign() == 0 {
			d.ResetAfter = t - now
			break
		}
	}
	return d
}

func (m *swModel) refund(amount, now int64) {
	k := now / m.w
	take := min(amount, m.counts[k])
	m.counts[k] -= take
	m.counts[k-1] -= min(amount-take, m.counts[k-1])
}

// TestSWModel checks every field of every reply against swModel, including
// refunds, with the state handled the way the engine handles it: stored only
// on write, and absent once its reset timestamp has passed.
func TestSWModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	decisions := 0
	for range 400 {
		p := WindowParams{Limit: 1 + r.Int64N(12), Window: 1 + r.Int64N(40)}
		m := &swModel{w: p.Window, counts: map[int64]int64{}}
		var s SWState
		var resetAt int64
		present := false
		now := r.Int64N(100)
		for range 150 {
			switch r.IntN(4) {
			case 0:
				now += r.Int64N(3 * p.Window)
			case 1:
				now += r.Int64N(p.Window/4 + 1)
			}
			if present && resetAt <= now {
				present = false
			}
			if r.IntN(10) == 0 {
				amount := r.Int64N(p.Limit + 1)
				m.refund(amount, now)
				if present {
					var live bool
					s, resetAt, live = SWRefund(s, p, amount, now)
					present = live
				}
				continue
			}
			cost := r.Int64N(p.Limit + 2)
			if r.IntN(2) == 0 {
				cost = min(1, cost)
			}
			next, ra, write, d := SWDecide(s, present, p, cost, now)
			want := m.decide(p.Limit, cost, now)
			if d != want {
				t.Fatalf("%+v state %+v/%v now=%d cost=%d:\n got %+v\nwant %+v", p, s, present, now, cost, d, want)
			}
			if write != (!d.Limited && cost > 0) {
				t.Fatalf("write=%v for %+v cost %d", write, d, cost)
			}
			if ra != now+d.ResetAfter {
				t.Fatalf("resetAt %d, want now+%d", ra, d.ResetAfter)
			}
			if got := SWRemaining(s, present, p, now); !d.Limited && cost == 0 && got != d.Remaining {
				t.Fatalf("SWRemaining %d, peek %d", got, d.Remaining)
			}
			if write {
				s, resetAt, present = next, ra, true
			}
			decisions++
		}
	}
	t.Logf("%d decisions compared", decisions)
}

// TestSWRetryAfterExact checks that retry_after is the first nanosecond at
// which the same cost passes when nothing else arrives, over random states
// with large windows where the model's nanosecond scan would be too slow.
func TestSWRetryAfterExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for range 20000 {
		p := WindowParams{Limit: 1 + r.Int64N(1000), Window: 1 + r.Int64N(1e12)}
		if r.IntN(4) == 0 {
			p = WindowParams{Limit: 1 + r.Int64N(math.MaxInt64), Window: 1 + r.Int64N(MaxDuration)}
		}
		now := r.Int64N(1 << 62)
		start := windowStart(now, p.Window)
		s := SWState{Start: start, Cur: r.Int64N(p.Limit + 1), Prev: r.Int64N(p.Limit + 1)}
		cost := 1 + r.Int64N(p.Limit)
		_, _, _, d := SWDecide(s, true, p, cost, now)
		if !d.Limited {
			continue
		}
		checked++
		if d.RetryAfter <= 0 || d.RetryAfter > 2*p.Window {
			t.Fatalf("%+v %+v now=%d cost=%d: retry_after %d", p, s, now, cost, d.RetryAfter)
		}
		if _, _, _, e := SWDecide(s, true, p, cost, now+d.RetryAfter); e.Limited {
			t.Fatalf("%+v %+v now=%d cost=%d: limited at retry_after %d", p, s, now, cost, d.RetryAfter)
		}
		if _, _, _, e := SWDecide(s, true, p, cost, now+d.RetryAfter-1); !e.Limited {
			t.Fatalf("%+v %+v now=%d cost=%d: allowed before retry_after %d", p, s, now, cost, d.RetryAfter)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d limited cases checked", checked)
	}
}

// TestSWExtremes runs the largest limits, windows and costs: every field
// must stay in range, and no sum may wrap.
func TestSWExtremes(t *testing.T) {
	ps := []WindowParams{{math.MaxInt64, MaxDuration}, {1, MaxDuration}, {math.MaxInt64, 1}, {1, 1}}
	nows := []int64{0, MaxDuration - 1, MaxDuration, 3 * MaxDuration, math.MaxInt64, -5}
	vals := []int64{0, 1, 1 << 62, math.MaxInt64}
	for _, p := range ps {
		for _, now := range nows {
			ws := windowStart(max(now, 0), p.Window)
			for _, start := range []int64{ws, ws - p.Window, 0} {
				for _, cur := range vals {
					for _, prev := range vals {
						for _, cost := range append(vals, p.Limit) {
							s := SWState{start, cur, prev}
							_, ra, _, d := SWDecide(s, true, p, cost, now)
							if d.Remaining < 0 || d.Remaining > p.Limit || d.ResetAfter < 0 || d.ResetAfter > 2*p.Window ||
								d.RetryAfter < -1 || d.RetryAfter > 2*p.Window || ra < max(now, 0) {
								t.Fatalf("%+v %+v now=%d cost=%d: %+v resetAt=%d", p, s, now, cost, d, ra)
							}
							if n, _, _ := SWRefund(s, p, cost, now); n.Cur < 0 || n.Prev < 0 {
								t.Fatalf("refund went negative: %+v", n)
							}
						}
					}
				}
			}
		}
	}
}

// TestBoundaryBurst is the published boundary experiment: limit 100 per 2 s,
// 100 requests at t=1.990 s and 100 more at t=2.010 s, windows aligned to the
// epoch so that 2.000 s is a boundary.
//
// The fixed window admits all 200. The log admits exactly 100: the first
// burst is still inside every rolling 2 s interval that holds the second. The
// sliding window counter also admits exactly 100: at 2.010 s the previous
// window's 100 still weigh 100*(1990/2000) = 99.5, and 99.5+1 > 100. The 101
// in the published figures comes from implementations that floor the
// estimate (99.5 -> 99); with the exact comparison, one more unit passes
// only once a whole unit has decayed, at 2.020 s (weight 99), which the
// second half of the test shows.
func TestBoundaryBurst(t *testing.T) {
	p := WindowParams{Limit: 100, Window: 2e9}
	burst := func(at1, at2 int64) (fw, sl, sw int) {
		var fs FWState
		var ss SWState
		var log []SLEntry
		fPresent, sPresent := false, false
		for _, at := range []int64{at1, at2} {
			for range 100 {
				if next, _, write, d := FWDecide(fs, fPresent, p, 1, at); write {
					fs, fPresent = next, true
					fw++
				} else if !d.Limited {
					t.Fatal("fixed window: allowed but nothing to write")
				}
				if next, _, write, _ := SWDecide(ss, sPresent, p, 1, at); write {
					ss, sPresent = next, true
					sw++
				}
				expired, admit, _, _ := SLDecide(log, p, 1, at)
				log = log[expired:]
				if admit {
					log = append(log, SLEntry{At: at, N: 1})
					sl++
				}
			}
		}
		return fw, sl, sw
	}
	fw, sl, sw := burst(1_990e6, 2_010e6)
	if fw != 200 || sl != 100 || sw != 100 {
		t.Errorf("at 1.990 s and 2.010 s: fixed %d (want 200), log %d (want 100), counter %d (want 100)", fw, sl, sw)
	}
	fw, sl, sw = burst(1_990e6, 2_020e6)
	if fw != 200 || sl != 100 || sw != 101 {
		t.Errorf("at 1.990 s and 2.020 s: fixed %d (want 200), log %d (want 100), counter %d (want 101)", fw, sl, sw)
	}
}

func TestSWAllocs(t *testing.T) {
	p := WindowParams{Limit: 100, Window: 60e9}
	s := SWState{Start: 60e9, Cur: 50, Prev: 80}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		next, ra, _, d := SWDecide(s, true, p, 1, 90e9)
		_, _, _, d2 := SWDecide(s, true, p, 90, 90e9)
		next, ra2, _ := SWRefund(next, p, 1, 90e9)
		sink += ra + ra2 + d.Remaining + d2.RetryAfter + next.Cur + SWRemaining(s, true, p, 90e9)
		if p.Validate() != nil {
			sink++
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	_ = sink
}

func BenchmarkSWDecide(b *testing.B) {
	p := WindowParams{Limit: 1000, Window: 60e9}
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		var s SWState
		now := int64(1_700_000_000e9)
		present := false
		for b.Loop() {
			now += 60e6 // 1000 per 60 s: the counter hovers below the limit
			var write bool
			var next SWState
			next, _, write, _ = SWDecide(s, present, p, 1, now)
			if write {
				s, present = next, true
			}
		}
	})
	b.Run("limited", func(b *testing.B) {
		b.ReportAllocs()
		now := int64(1_700_000_030e9)
		s := SWState{Start: windowStart(now, p.Window), Cur: 990, Prev: 900}
		var d Decision
		for b.Loop() {
			_, _, _, d = SWDecide(s, true, p, 1, now)
		}
		if !d.Limited {
			b.Fatal("not limited")
		}
	})
}
