package ratelimit

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// slModel is the sliding log written the obvious way: one timestamp per
// admitted unit; a unit stamped at u counts at t while u > t-w.
type slModel struct {
	w     int64
	units []int64
}

func (m *slModel) live(t int64) int64 {
	var n int64
	for _, u := range m.units {
		if u > t-m.w {
			n++
		}
	}
	return n
}

func (m *slModel) decide(limit, cost, now int64) Decision {
	d := Decision{Limit: limit, RetryAfter: -1}
	if cost <= limit && m.live(now)+cost <= limit {
		for range cost {
			m.units = append(m.units, now)
		}
	} else {
		d.Limited = true
		if cost <= limit {
			for t := now + 1; ; t++ {
				if m.live(t)+cost <= limit {
					d.RetryAfter = t - now
					break
				}
			}
		}
	}
	d.Remaining = max(limit-m.live(now), 0)
	for t := now; ; t++ {
		if m.live(t) == 0 {
			d.ResetAfter = t - now
			break
		}
	}
	return d
}

func (m *slModel) refund(amount int64) {
	m.units = m.units[:len(m.units)-int(min(amount, int64(len(m.units))))]
}

// slApply does what the engine does with an SLDecide result.
func slApply(log []SLEntry, expired int, admit bool, cost, now int64) []SLEntry {
	log = log[expired:]
	if !admit {
		return log
	}
	if n := len(log); n > 0 && log[n-1].At == now {
		log[n-1].N += cost
		return log
	}
	return append(log, SLEntry{At: now, N: cost})
}

// TestSLModel checks every field of every reply against slModel, including
// refunds, with the state handled the way the engine handles it.
func TestSLModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	decisions := 0
	for range 400 {
		p := WindowParams{Limit: 1 + r.Int64N(12), Window: 1 + r.Int64N(40)}
		m := &slModel{w: p.Window}
		var log []SLEntry
		var resetAt int64
		now := r.Int64N(100)
		for range 150 {
			switch r.IntN(4) {
			case 0:
				now += r.Int64N(2 * p.Window)
			case 1:
				now += r.Int64N(p.Window/4 + 1)
			}
			if len(log) > 0 && resetAt <= now {
				log = log[:0]
			}
			if r.IntN(10) == 0 {
				amount := r.Int64N(p.Limit + 1)
				m.refund(amount)
				log = SLRefund(log, amount)
				if len(log) > 0 {
					resetAt = log[len(log)-1].At + p.Window
				}
				continue
			}
			cost := r.Int64N(p.Limit + 2)
			if r.IntN(2) == 0 {
				cost = min(1, cost)
			}
			before := slices.Clone(log)
			expired, admit, ra, d := SLDecide(log, p, cost, now)
			if !slices.Equal(log, before) {
				t.Fatal("SLDecide modified its input")
			}
			want := m.decide(p.Limit, cost, now)
			if d != want {
				t.Fatalf("%+v log %v now=%d cost=%d:\n got %+v\nwant %+v", p, log, now, cost, d, want)
			}
			if admit != (!d.Limited && cost > 0) {
				t.Fatalf("admit=%v for %+v cost %d", admit, d, cost)
			}
			if ra != now+d.ResetAfter {
				t.Fatalf("resetAt %d, want now+%d", ra, d.ResetAfter)
			}
			if got := SLRemaining(log, p, now); cost == 0 && got != d.Remaining {
				t.Fatalf("SLRemaining %d, peek %d", got, d.Remaining)
			}
			for _, e := range log[expired:] {
				if e.At <= now-p.Window {
					t.Fatalf("expired entry %+v kept at now=%d", e, now)
				}
			}
			log = slApply(log, expired, admit, cost, now)
			if admit {
				resetAt = ra
			}
			if int64(len(log)) > p.Limit {
				t.Fatalf("log holds %d entries for limit %d", len(log), p.Limit)
			}
			decisions++
		}
	}
	t.Logf("%d decisions compared", decisions)
}

// TestSLRetryAfterExact: at now+retry_after the refused cost passes, one
// nanosecond earlier it does not.
func TestSLRetryAfterExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	checked := 0
	for range 5000 {
		p := WindowParams{Limit: 1 + r.Int64N(50), Window: 1 + r.Int64N(1e12)}
		now := int64(1<<61) + r.Int64N(1<<60)
		// A few expired entries, then live ones, oldest first, some
		// sharing a timestamp boundary with the window's edge.
		var log []SLEntry
		at := now - p.Window - r.Int64N(3)
		for range r.IntN(20) {
			log = append(log, SLEntry{At: at, N: 1 + r.Int64N(4)})
			at += r.Int64N(p.Window/8 + 1)
			if at > now {
				break
			}
		}
		cost := 1 + r.Int64N(p.Limit)
		_, _, _, d := SLDecide(log, p, cost, now)
		if !d.Limited {
			continue
		}
		checked++
		if _, admit, _, _ := SLDecide(log, p, cost, now+d.RetryAfter); !admit {
			t.Fatalf("%+v %v now=%d cost=%d: refused at retry_after %d", p, log, now, cost, d.RetryAfter)
		}
		if _, admit, _, _ := SLDecide(log, p, cost, now+d.RetryAfter-1); admit {
			t.Fatalf("%+v %v now=%d cost=%d: admitted before retry_after %d", p, log, now, cost, d.RetryAfter)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d limited cases checked", checked)
	}
}

func TestSLRefund(t *testing.T) {
	log := []SLEntry{{1, 3}, {2, 2}, {3, 4}}
	got := SLRefund(slices.Clone(log), 5)
	if want := []SLEntry{{1, 3}, {2, 1}}; !slices.Equal(got, want) {
		t.Fatalf("refund 5: %v, want %v", got, want)
	}
	if got := SLRefund(slices.Clone(log), 0); !slices.Equal(got, log) {
		t.Fatalf("refund 0: %v", got)
	}
	if got := SLRefund(slices.Clone(log), -3); !slices.Equal(got, log) {
		t.Fatalf("refund -3: %v", got)
	}
	if got := SLRefund(slices.Clone(log), math.MaxInt64); len(got) != 0 {
		t.Fatalf("refund all: %v", got)
	}
	if got := SLRefund(slices.Clone(log), 4); !slices.Equal(got, log[:2]) {
		t.Fatalf("refund exactly the newest entry: %v", got)
	}
}

// TestSLExtremes: corrupt and extreme logs never wrap a count or a time.
func TestSLExtremes(t *testing.T) {
	logs := [][]SLEntry{
		nil,
		{{0, math.MaxInt64}, {1, math.MaxInt64}, {2, math.MaxInt64}},
		{{math.MaxInt64, 1}},
		{{5, -7}, {6, 1}},
		{{math.MaxInt64 - 1, math.MaxInt64}, {math.MaxInt64, 1}},
	}
	for _, p := range []WindowParams{{1, 1}, {math.MaxInt64, MaxDuration}, {3, 10}} {
		for _, log := range logs {
			for _, now := range []int64{-1, 0, 6, MaxDuration, math.MaxInt64} {
				for _, cost := range []int64{0, 1, p.Limit, 1 << 62, math.MaxInt64} {
					_, _, ra, d := SLDecide(log, p, cost, now)
					if d.Remaining < 0 || d.Remaining > p.Limit || d.ResetAfter < 0 || d.ResetAfter > p.Window ||
						d.RetryAfter < -1 || d.RetryAfter > p.Window || ra < max(now, 0) {
						t.Fatalf("%+v %v now=%d cost=%d: %+v resetAt %d", p, log, now, cost, d, ra)
					}
				}
			}
		}
	}
}

func TestSLAllocs(t *testing.T) {
	p := WindowParams{Limit: 100, Window: 60e9}
	log := make([]SLEntry, 0, 100)
	for i := range int64(100) {
		log = append(log, SLEntry{At: i * 1e9, N: 1})
	}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		expired, _, ra, d := SLDecide(log, p, 1, 70e9)
		_, _, _, d2 := SLDecide(log, p, 5, 100e9)
		sink += int64(expired) + ra + d.Remaining + d2.RetryAfter + SLRemaining(log, p, 80e9)
		sink += int64(len(SLRefund(log[:0], 1)))
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	_ = sink
}

func BenchmarkSLDecide(b *testing.B) {
	p := WindowParams{Limit: 100, Window: 60e9}
	for _, n := range []int{1, 10, 100} {
		log := make([]SLEntry, 0, 100)
		for i := range int64(n) {
			log = append(log, SLEntry{At: 1_700_000_000e9 + i*1e8, N: 100 / int64(n)})
		}
		now := log[len(log)-1].At + 1e9
		b.Run("limited/"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var d Decision
			for b.Loop() {
				_, _, _, d = SLDecide(log, p, 1, now)
			}
			if !d.Limited {
				b.Fatal("not limited")
			}
		})
	}
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		log := make([]SLEntry, 0, 128)
		now := int64(1_700_000_000e9)
		for b.Loop() {
			// 100 per 60 s, one every 0.6 s: the log stays near 100 entries.
			now += 6e8
			expired, admit, _, _ := SLDecide(log, p, 1, now)
			if expired > 0 {
				log = append(log[:0], log[expired:]...)
			}
			if admit {
				log = append(log, SLEntry{At: now, N: 1})
			}
		}
	})
}
