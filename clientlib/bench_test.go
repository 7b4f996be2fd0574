package clientlib_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// BenchmarkAllow compares Allow with the bare go-redis call it wraps, on one
// connection to an in-process server: the difference is the Limiter's
// overhead (validation, pooled arguments, timeout, reply conversion).
func BenchmarkAllow(b *testing.B) {
	s := sluicetest.Start(b, sluicetest.Options{})
	ctx := context.Background()
	// A limit this loop never reaches, so every call is the allowed path.
	limit := clientlib.GCRA(1_000_000, time.Second, 1_000_000)
	raw := func(rdb *redis.Client, ctx context.Context, key string) ([]int64, error) {
		return rdb.Do(ctx, "CL.THROTTLE", key, 999_999, 1_000_000, 1, 1, "MS").Int64Slice()
	}
	// ContextTimeoutEnabled is how a limiter's client should be built: the
	// timeout then rides on the context.
	client := func(b *testing.B, ctxDeadlines bool) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1, ContextTimeoutEnabled: ctxDeadlines})
		b.Cleanup(func() { rdb.Close() })
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		return rdb
	}

	b.Run("raw-do", func(b *testing.B) {
		rdb := client(b, true)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := raw(rdb, ctx, "raw"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-do-timeout", func(b *testing.B) {
		rdb := client(b, true)
		b.ReportAllocs()
		for b.Loop() {
			cctx, cancel := context.WithTimeout(ctx, clientlib.DefaultTimeout)
			_, err := raw(rdb, cctx, "raw-timeout")
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	// On a noisy machine an occasional call outlives the 50 ms timeout and
	// the fallback answers; that is the policy working, so it is counted
	// (timeouts per run), not fatal.
	run := func(b *testing.B, l *clientlib.Limiter, key string) {
		b.ReportAllocs()
		for b.Loop() {
			if r, err := l.Allow(ctx, key, limit); err != nil || !r.Allowed {
				b.Fatal(r, err)
			}
		}
		b.ReportMetric(float64(l.Stats().PolicyAnswers), "timeouts")
	}
	b.Run("limiter", func(b *testing.B) {
		run(b, clientlib.NewLimiter(client(b, true)), "limiter")
	})
	b.Run("limiter-default-client", func(b *testing.B) {
		// A client that ignores context deadlines: the timeout is enforced
		// on a helper goroutine.
		run(b, clientlib.NewLimiter(client(b, false)), "limiter-default")
	})
}

// BenchmarkOverLimitCacheHit measures a refusal answered locally: a key the
// server has refused for an hour.
func BenchmarkOverLimitCacheHit(b *testing.B) {
	s := sluicetest.Start(b, sluicetest.Options{})
	rdb := newClient(b, s.Addr)
	l := clientlib.NewLimiter(rdb, clientlib.WithOverLimitCache(1<<16))
	ctx := context.Background()
	limit := clientlib.GCRA(1, time.Hour, 1)
	const keys = 1024
	for i := range keys {
		k := "hot:" + strconv.Itoa(i)
		l.Allow(ctx, k, limit)
		if r, err := l.Allow(ctx, k, limit); err != nil || r.Allowed {
			b.Fatal(r, err)
		}
		if r, _ := l.Allow(ctx, k, limit); r.Source != clientlib.FromCache {
			b.Fatalf("not cached: %+v", r)
		}
	}
	b.Run("one-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, _ := l.Allow(ctx, "hot:0", limit); r.Allowed {
				b.Fatal(r)
			}
		}
	})
	b.Run("parallel-1024-keys", func(b *testing.B) {
		names := make([]string, keys)
		for i := range names {
			names[i] = "hot:" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if r, _ := l.Allow(ctx, names[i%keys], limit); r.Allowed {
					panic("admitted")
				}
				i++
			}
		})
	})
	if hits := l.Stats().CacheHits; hits == 0 {
		b.Fatal("no cache hits")
	}
}

// stubHook answers every command without the network, so that
// BenchmarkAllowClientSide measures only what runs in this process.
type stubHook struct{}

func (stubHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (stubHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.IntSliceCmd:
			c.SetVal([]int64{0, 1_000_000, 999_999, -1, 1})
		case *redis.Cmd:
			c.SetVal([]interface{}{int64(0), int64(1_000_000), int64(999_999), int64(-1), int64(1)})
		}
		return nil
	}
}

func (stubHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// BenchmarkAllowClientSide isolates the Limiter's own cost: the server is
// replaced by a hook that answers at once, so the difference between the
// two is the overhead Allow adds to a raw rdb.Do, without network noise.
// (The stub skips go-redis's reply parsing, which IntSliceCmd does with
// fewer allocations than Cmd; the full figures are in BenchmarkAllow.)
func BenchmarkAllowClientSide(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	rdb.AddHook(stubHook{})
	ctx := context.Background()
	b.Run("raw-do", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rdb.Do(ctx, "CL.THROTTLE", "k", 999_999, 1_000_000, 1, 1, "MS").Int64Slice(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter", func(b *testing.B) {
		l := clientlib.NewLimiter(rdb)
		limit := clientlib.GCRA(1_000_000, time.Second, 1_000_000)
		b.ReportAllocs()
		for b.Loop() {
			if r, err := l.Allow(ctx, "k", limit); err != nil || !r.Allowed {
				b.Fatal(r, err)
			}
		}
	})
}
