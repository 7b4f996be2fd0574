package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shard"
)

// A big sorted set against a model, through every write that strips and
// re-indexes it and the two fast paths of the sliding log, with a full
// read-back after each step.
func TestBigZSetAgainstModel(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	r := rand.New(rand.NewPCG(3, 4))
	m := zmodel{}
	var seed []string
	for i := range 500 {
		k := "s" + strconv.Itoa(i)
		seed = append(seed, strconv.Itoa(i), k)
		m[k] = float64(i)
	}
	zrun(t, e, &b, OpZAdd, "k", seed...)
	top := 500.0
	for step := range 4000 {
		switch r.IntN(10) {
		case 0, 1, 2, 3: // the newest, at the top (the fast path)
			top++
			k := "n" + strconv.Itoa(step)
			zrun(t, e, &b, OpZAdd, "k", FormatDouble(top), k)
			m[k] = top
		case 4, 5: // the oldest, from the bottom (the fast path)
			keys := m.sorted()
			cut := m[keys[min(2, len(keys)-1)]]
			got := zrun(t, e, &b, OpZRemRangeByScore, "k", "-inf", FormatDouble(cut))
			n := 0
			for k, s := range m {
				if s <= cut {
					delete(m, k)
					n++
				}
			}
			if got.Int != int64(n) {
				t.Fatalf("step %d: ZREMRANGEBYSCORE removed %d, want %d", step, got.Int, n)
			}
		case 6: // an existing member, or one in the middle
			k := "s" + strconv.Itoa(r.IntN(600))
			s := float64(r.IntN(int(top)))
			zrun(t, e, &b, OpZAdd, "k", FormatDouble(s), k)
			m[k] = s
		case 7:
			k := "s" + strconv.Itoa(r.IntN(600))
			zrun(t, e, &b, OpZRem, "k", k)
			delete(m, k)
		case 8:
			k := "s" + strconv.Itoa(r.IntN(600))
			zrun(t, e, &b, OpZIncrBy, "k", "0.5", k)
			m[k] += 0.5
		case 9:
			if len(m) > 300 {
				zrun(t, e, &b, OpZPopMin, "k", "2")
				keys := m.sorted()
				delete(m, keys[0])
				delete(m, keys[1])
			}
		}
		if got := zflat(zrun(t, e, &b, OpZRange, "k", "0", "-1", "WITHSCORES")); got != m.render() {
			t.Fatalf("step %d: the set differs from the model", step)
		}
		if n := zrun(t, e, &b, OpZCard, "k").Int; n != int64(len(m)) {
			t.Fatalf("step %d: ZCARD %d, want %d", step, n, len(m))
		}
	}
}

// indexed reports whether key holds an indexed sorted set.
func indexed(t *testing.T, e *Engine, key string) bool {
	var ok bool
	done := make(chan struct{})
	e.shards[0].Submit(taskFunc(func(tb *shard.Table) {
		k := []byte(key)
		en, found := tb.Get(k, shard.Hash(k), time.Now().UnixNano())
		ok = found && en.Kind == shard.KindZSet && zIsIndexed(en.Payload)
		close(done)
	}))
	<-done
	return ok
}

type taskFunc func(*shard.Table)

func (f taskFunc) Run(t *shard.Table) { f(t) }

// A sliding log of 10,000 members stays indexed, and its requests (the
// oldest out, the newest in) allocate nothing.
func TestBigSlidingLogStaysIndexed(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	s := slidingLog{key: []byte("rl:big"), inf: []byte("-inf"), window: 10_000 * 1000}
	at, seq := int64(1_700_000_000_000), 0
	step := func() {
		at += 1000
		seq++
		s.fill(&b, at, seq)
		e.Execute(&b, time.Now().UnixNano())
	}
	for range 10_200 {
		step()
	}
	if n := b.Replies[1].Int; n < 9_999 || n > 10_000 {
		t.Fatalf("ZCARD of the log: %d, want about 10,000", n)
	}
	if !indexed(t, e, "rl:big") {
		t.Fatal("a 10,000-member log has no member index")
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs > 0 {
		t.Errorf("big sliding log: %.1f allocations per request, want 0", allocs)
	}
	if got := zflat(b.Replies[0]); got != "1" {
		t.Errorf("ZREMRANGEBYSCORE removed %s, want 1", got)
	}
}

// BenchmarkZSetSlidingLogSize: a request of the sliding log (ZREMRANGEBYSCORE
// of the oldest, ZCARD, ZADD of the newest, EXPIRE) on logs of 100, 1,000
// and 10,000 members. It costs about the same at every size.
func BenchmarkZSetSlidingLogSize(b *testing.B) {
	for _, size := range []int{100, 1000, 10_000} {
		b.Run("members="+strconv.Itoa(size), func(b *testing.B) {
			e := New(Config{Shards: 1})
			defer e.Close()
			var batch Batch
			s := slidingLog{key: []byte("rl:user:1"), inf: []byte("-inf"), window: int64(size) * 1000}
			at := int64(1_700_000_000_000)
			for i := range size + 100 {
				at += 1000
				s.fill(&batch, at, i)
				e.Execute(&batch, time.Now().UnixNano())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				at += 1000
				s.fill(&batch, at, i)
				e.Execute(&batch, time.Now().UnixNano())
			}
		})
	}
}
