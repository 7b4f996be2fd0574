package server_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// TestBoundaryBurst is the seed experiment through DEBUG CLOCK: limit 100
// per 2 s, 100 requests at t=1.990 s and 100 at t=2.010 s (windows aligned
// to the epoch, so the boundary falls between the bursts). The table in
// docs/algorithms.md comes from this test.
func TestBoundaryBurst(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	now := sluicetest.FreezeClock(t, ts.Client)
	// The next multiple of 2 s, plus a whole period so nothing is stale.
	start := now - now%2000 + 4000
	families := []struct {
		name string
		args []any
		want int
	}{
		{"fixed window (FW.CHECK)", []any{"FW.CHECK", "fw", "100", "2"}, 200},
		{"sliding window counter (SW.CHECK)", []any{"SW.CHECK", "sw", "100", "2"}, 100},
		{"sliding log (SL.CHECK)", []any{"SL.CHECK", "sl", "100", "2"}, 100},
		// 100 per 2 s with a burst of 100: one more cell every 20 ms.
		{"GCRA (CL.THROTTLE 99 100 2)", []any{"CL.THROTTLE", "gc", "99", "100", "2"}, 101},
	}
	for fi, f := range families {
		admitted := 0
		start := start + int64(fi)*4000 // the clock never goes back
		for _, at := range []int64{start + 1990, start + 2010} {
			ts.Expect(t, "OK", "DEBUG", "CLOCK", "SET", at)
			for i := 0; i < 100; i++ {
				if ts.Do(t, f.args...).([]any)[0] == int64(0) {
					admitted++
				}
			}
		}
		t.Logf("%-36s admitted %d of 200 within 20 ms across the boundary", f.name, admitted)
		if admitted != f.want {
			t.Errorf("%s admitted %d, want %d", f.name, admitted, f.want)
		}
	}
}

// TestRefundRoundTrip: consume n, refund n, and the limiter is as before,
// for every family.
func TestRefundRoundTrip(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	sluicetest.FreezeClock(t, ts.Client)
	for _, f := range []struct {
		name string
		args []any // without the cost
	}{
		{"gcra", []any{"CL.THROTTLE", "r:gcra", "9", "10", "60"}},
		{"sliding-window", []any{"SW.CHECK", "r:sw", "10", "60"}},
		{"sliding-log", []any{"SL.CHECK", "r:sl", "10", "60"}},
		{"fixed-window", []any{"FW.CHECK", "r:fw", "10", "60"}},
	} {
		t.Run(f.name, func(t *testing.T) {
			key := f.args[1]
			ts.Do(t, append(f.args, "3")...)
			before := ts.Do(t, "LIMIT.INFO", key)
			ts.Do(t, append(f.args, "4")...)
			if got := ts.Do(t, "LIMIT.REFUND", key, "4"); got != int64(7) {
				t.Fatalf("refund reply %v, want remaining 7", got)
			}
			if after := ts.Do(t, "LIMIT.INFO", key); !reflect.DeepEqual(before, after) {
				t.Fatalf("after consume+refund:\n %v\nwant\n %v", after, before)
			}
			// Refunding more than was consumed stops at full and leaves no state.
			if got := ts.Do(t, "LIMIT.REFUND", key, "1000"); got != int64(10) {
				t.Fatalf("over-refund reply %v, want 10", got)
			}
			ts.Expect(t, nil, "LIMIT.INFO", key)
		})
	}
}

// TestLimitAllProperty interleaves LIMIT.ALL and single checks on
// overlapping keys from many connections, then checks per key that the
// units admitted (counted from the replies) never exceed the limit and
// equal what the server recorded: a LIMIT.ALL applied in part would break
// the equality.
func TestLimitAllProperty(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{Shards: 8}})
	sluicetest.FreezeClock(t, ts.Client) // one instant: every window holds everything admitted
	const keys, limit = 12, 40
	key := func(i int) string { return "prop:" + strconv.Itoa(i) }
	family := func(i int) string { return []string{"SL.CHECK", "FW.CHECK"}[i%2] }
	var mu sync.Mutex
	admitted := make([]int64, keys)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for i := 0; i < 150; i++ {
				if rng.IntN(3) == 0 {
					k := rng.IntN(keys)
					cost := int64(1 + rng.IntN(3))
					v, err := ts.Client.Do(ctx, family(k), key(k), limit, 3600, cost).Result()
					if err != nil {
						t.Error(err)
						return
					}
					if v.([]any)[0] == int64(0) {
						mu.Lock()
						admitted[k] += cost
						mu.Unlock()
					}
					continue
				}
				n := 2 + rng.IntN(3)
				picked := rng.Perm(keys)[:n]
				args := []any{"LIMIT.ALL", n}
				costs := make([]int64, n)
				for j, k := range picked {
					costs[j] = int64(1 + rng.IntN(4))
					args = append(args, family(k), key(k), limit, 3600, costs[j])
				}
				v, err := ts.Client.Do(ctx, args...).Result()
				if err != nil {
					t.Error(err)
					return
				}
				reply := v.([]any)
				if reply[0] == int64(0) {
					mu.Lock()
					for j, k := range picked {
						admitted[k] += costs[j]
					}
					mu.Unlock()
				} else if reply[1].(int64) < 0 {
					t.Errorf("limited LIMIT.ALL without a tripping index: %v", reply)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		info := ts.Do(t, "LIMIT.INFO", key(k))
		remaining := int64(limit)
		if info != nil {
			fields := info.([]any)
			for i := 0; i+1 < len(fields); i += 2 {
				if fields[i] == "remaining" {
					remaining = fields[i+1].(int64)
				}
			}
		}
		used := limit - remaining
		if admitted[k] > limit || used != admitted[k] {
			t.Errorf("%s: replies admitted %d units, server holds %d (limit %d)", key(k), admitted[k], used, limit)
		}
	}
	if t.Failed() {
		fmt.Println(admitted)
	}
}
