package ratelimit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fwModel is the fixed window written the obvious way: a count per aligned
// window.
type fwModel struct {
	w      int64
	counts map[int64]int64
}

func (m *fwModel) decide(limit, cost, now int64) Decision {
	k := now / m.w
	end := (k+1)*m.w - now
	d := Decision{Limit: limit, RetryAfter: -1}
	switch {
	case cost > limit:
		d.Limited = true
	case m.counts[k]+cost > limit:
		d.Limited = true
		d.RetryAfter = end
	default:
		m.counts[k] += cost
	}
	d.Remaining = limit - m.counts[k]
	if m.counts[k] > 0 {
		d.ResetAfter = end
	}
	return d
}

// TestFWModel checks every field of every reply against fwModel, including
// refunds, with the state handled the way the engine handles it.
func TestFWModel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	decisions := 0
	for range 400 {
		p := WindowParams{Limit: 1 + r.Int64N(12), Window: 1 + r.Int64N(40)}
		m := &fwModel{w: p.Window, counts: map[int64]int64{}}
		var s FWState
		var resetAt int64
		present := false
		now := r.Int64N(100)
		for range 150 {
			switch r.IntN(4) {
			case 0:
				now += r.Int64N(2 * p.Window)
			case 1:
				now += r.Int64N(p.Window/4 + 1)
			}
			if present && resetAt <= now {
				present = false
			}
			if r.IntN(10) == 0 {
				amount := r.Int64N(p.Limit + 1)
				k := now / p.Window
				m.counts[k] -= min(amount, m.counts[k])
				if present {
					s, present = FWRefund(s, amount)
				}
				continue
			}
			cost := r.Int64N(p.Limit + 2)
			if r.IntN(2) == 0 {
				cost = min(1, cost)
			}
			next, ra, write, d := FWDecide(s, present, p, cost, now)
			if want := m.decide(p.Limit, cost, now); d != want {
				t.Fatalf("%+v state %+v/%v now=%d cost=%d:\n got %+v\nwant %+v", p, s, present, now, cost, d, want)
			}
			if write != (!d.Limited && cost > 0) {
				t.Fatalf("write=%v for %+v cost %d", write, d, cost)
			}
			if write && ra != next.Start+p.Window {
				t.Fatalf("resetAt %d, window ends at %d", ra, next.Start+p.Window)
			}
			if d.Limited && cost <= p.Limit {
				if _, _, _, e := FWDecide(s, present, p, cost, now+d.RetryAfter); e.Limited {
					t.Fatalf("limited at retry_after")
				}
				if _, _, _, e := FWDecide(s, present, p, cost, now+d.RetryAfter-1); !e.Limited {
					t.Fatalf("allowed before retry_after")
				}
			}
			if got := FWRemaining(s, present, p, now); cost == 0 && got != d.Remaining {
				t.Fatalf("FWRemaining %d, peek %d", got, d.Remaining)
			}
			if write {
				s, resetAt, present = next, ra, true
			}
			decisions++
		}
	}
	t.Logf("%d decisions compared", decisions)
}

func TestFWRefund(t *testing.T) {
	s := FWState{Start: 10, Count: 5}
	if n, live := FWRefund(s, 2); !live || n.Count != 3 || n.Start != 10 {
		t.Fatalf("refund 2: %+v %v", n, live)
	}
	if n, live := FWRefund(s, math.MaxInt64); live || n.Count != 0 {
		t.Fatalf("refund all: %+v %v", n, live)
	}
	if n, live := FWRefund(s, -1); !live || n.Count != 5 {
		t.Fatalf("refund -1: %+v %v", n, live)
	}
}

func TestFWExtremes(t *testing.T) {
	for _, p := range []WindowParams{{1, 1}, {math.MaxInt64, MaxDuration}, {3, 10}} {
		for _, now := range []int64{-1, 0, 6, MaxDuration, math.MaxInt64} {
			ws := windowStart(max(now, 0), p.Window)
			for _, count := range []int64{-3, 0, 1, math.MaxInt64} {
				for _, cost := range []int64{0, 1, p.Limit, 1 << 62, math.MaxInt64} {
					_, ra, _, d := FWDecide(FWState{ws, count}, true, p, cost, now)
					if d.Remaining < 0 || d.Remaining > p.Limit || d.ResetAfter < 0 || d.ResetAfter > p.Window ||
						d.RetryAfter < -1 || d.RetryAfter > p.Window || ra < max(now, 0) {
						t.Fatalf("%+v count=%d now=%d cost=%d: %+v resetAt %d", p, count, now, cost, d, ra)
					}
				}
			}
		}
	}
}

func TestFWAllocs(t *testing.T) {
	p := WindowParams{Limit: 100, Window: 60e9}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		next, ra, _, d := FWDecide(FWState{60e9, 40}, true, p, 1, 90e9)
		next, _ = FWRefund(next, 1)
		sink += next.Count + ra + d.Remaining + FWRemaining(next, true, p, 90e9)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	_ = sink
}
