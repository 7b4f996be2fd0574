package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/internal/clock"
)

// TestStoredSlidingLogMatchesModel drives SL.CHECK and refunds through the
// engine (ring storage, growth, expiry, merging) and compares every reply
// with SLDecide over a plain slice.
func TestStoredSlidingLogMatchesModel(t *testing.T) {
	clk := clock.New(nil)
	clk.Set(clk.Now() + 1e9)
	e := New(Config{Shards: 2})
	defer e.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	p := ratelimit.WindowParams{Limit: 37, Window: 5e8}
	model := map[string][]ratelimit.SLEntry{}
	var b Batch
	for step := 0; step < 60000; step++ {
		key := fmt.Sprintf("log%d", rng.IntN(6))
		now := clk.Now()
		b.Reset()
		c := b.Add()
		c.Key = []byte(key)
		entries := model[key]
		if rng.IntN(8) == 0 {
			amount := int64(rng.IntN(6))
			c.Op, c.N[0] = OpRefund, amount
			e.Execute(&b, now)
			expired, _, _, _ := ratelimit.SLDecide(entries, p, 0, now)
			live := entries[expired:]
			if len(live) == 0 {
				if b.Replies[0].Kind != ReplyNil {
					t.Fatalf("step %d: refund of an empty log replied %+v", step, b.Replies[0])
				}
				delete(model, key)
				continue
			}
			live = ratelimit.SLRefund(append([]ratelimit.SLEntry(nil), live...), amount)
			want := ratelimit.SLRemaining(live, p, now)
			if len(live) == 0 {
				want = p.Limit
				delete(model, key)
			} else {
				model[key] = live
			}
			if b.Replies[0].Int != want {
				t.Fatalf("step %d: refund replied %d, model %d", step, b.Replies[0].Int, want)
			}
		} else {
			cost := int64(rng.IntN(4))
			c.Op, c.N = OpSLCheck, [4]int64{p.Limit, p.Window, cost}
			e.Execute(&b, now)
			expired, admit, _, want := ratelimit.SLDecide(entries, p, cost, now)
			if got := b.Replies[0].Dec; got != want {
				t.Fatalf("step %d %s cost %d: got %+v, model %+v", step, key, cost, got, want)
			}
			if admit {
				entries = append([]ratelimit.SLEntry(nil), entries[expired:]...)
				if n := len(entries); n > 0 && entries[n-1].At == now {
					entries[n-1].N += cost
				} else {
					entries = append(entries, ratelimit.SLEntry{At: now, N: cost})
				}
				model[key] = entries
			}
		}
		if rng.IntN(3) == 0 {
			clk.Advance(int64(rng.IntN(60)) * 1e6)
		}
	}
}

// TestSlidingLogAtItsLargestLimit: a log at the largest limit, one entry
// per unit (each admitted at its own nanosecond), holds all of them and
// then refuses; LogFits refuses a key too long for that worst case.
func TestSlidingLogAtItsLargestLimit(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	now := int64(1e18)
	check := Command{Op: OpSLCheck, Key: []byte("big"), N: [4]int64{MaxLogLimit, 3600e9, 1}}
	if !LogFits(len(check.Key), MaxLogLimit) {
		t.Fatal("LogFits refuses a short key at the largest limit")
	}
	for i := range MaxLogLimit {
		r := exec1(e, now+int64(i), check)
		if r.Kind != ReplyDecision || r.Dec.Limited {
			t.Fatalf("unit %d of %d: %+v", i+1, MaxLogLimit, r)
		}
	}
	if r := exec1(e, now+MaxLogLimit, check); r.Kind != ReplyDecision || !r.Dec.Limited {
		t.Fatalf("past the limit: %+v", r)
	}
	if LogFits(20000, MaxLogLimit) || LogFits(3, MaxLogLimit+1) || !LogFits(20000, 1000) {
		t.Fatal("LogFits is wrong about a long key or a limit past the largest")
	}
}
