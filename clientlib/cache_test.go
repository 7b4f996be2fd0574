package clientlib_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// lockstep moves the server clock and the Limiter's local clock together,
// so that the cache's idea of "until the retry time" and the server's agree.
type lockstep struct {
	t     *testing.T
	rdb   redis.UniversalClient
	local *fakeClock
}

func (c lockstep) advance(d time.Duration) {
	sluicetest.AdvanceClock(c.t, c.rdb, d)
	c.local.Advance(d)
}

// A hot limited key costs at most one server request per retry-after
// window: the cache answers the rest.
func TestOverLimitCacheHotKey(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	hook := &countHook{}
	rdb.AddHook(hook)
	sluicetest.FreezeClock(t, rdb)
	local := newFakeClock()
	clock := lockstep{t, rdb, local}
	l := newLimiter(rdb, clientlib.WithOverLimitCache(1024), clientlib.WithClock(local.Now))
	ctx := context.Background()
	// One unit per second, burst 2: once limited, retry-after is 1 s.
	limit := clientlib.GCRA(1, time.Second, 2)

	admitted := 0
	for window := range 5 {
		before := hook.count("cl.throttle")
		for range 1000 {
			r, err := l.Allow(ctx, "hot", limit)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
			} else if r.Source == clientlib.FromCache && (r.RetryAfter <= 0 || r.RetryAfter > time.Second || r.Limit != 2) {
				t.Errorf("cached refusal %+v", r)
			}
		}
		sent := hook.count("cl.throttle") - before
		// The first window spends the burst (2) and learns the refusal (1);
		// each later one admits the unit that dripped in and is refused once.
		want := 2
		if window == 0 {
			want = 3
		}
		if sent != want {
			t.Errorf("window %d: %d requests reached the server, want %d", window, sent, want)
		}
		clock.advance(time.Second)
	}
	if admitted != 2+4 {
		t.Errorf("admitted %d, want 6", admitted)
	}
	if st := l.Stats(); st.CacheHits < 4900 {
		t.Errorf("cache hits %d", st.CacheHits)
	}

	// A larger cost is refused at least as long; a peek is never answered
	// from the cache.
	l.Allow(ctx, "hot", limit) // the unit that dripped in
	if r, _ := l.Allow(ctx, "hot", limit); r.Allowed || r.Source != clientlib.FromServer {
		t.Fatalf("%+v", r)
	}
	before := hook.count("cl.throttle")
	if r, _ := l.AllowN(ctx, "hot", limit, 2); r.Allowed {
		t.Errorf("cost 2 admitted while cost 1 is refused: %+v", r)
	}
	if hook.count("cl.throttle") != before {
		t.Errorf("cost 2 was not answered from the cache")
	}
	if r, _ := l.Peek(ctx, "hot", limit); r.Source != clientlib.FromServer {
		t.Errorf("a peek was answered from the cache: %+v", r)
	}
	// All consults the cache for each limit: the cached one decides, and
	// the limits it did not look at are reported as unknown.
	res, err := l.All(ctx, clientlib.Request{Key: "other", Limit: clientlib.PerMinute(5), Cost: 1},
		clientlib.Request{Key: "hot", Limit: limit, Cost: 1})
	if err != nil || res.Allowed || res.Index != 1 || res.Source != clientlib.FromCache ||
		res.Results[0].Remaining != -1 || res.Results[1].Source != clientlib.FromCache || hook.count("limit.all") != 0 {
		t.Errorf("All on a cached key: %+v %v", res, err)
	}
	// Reset clears this process's cache for the key.
	if _, err := l.Reset(ctx, "hot"); err != nil {
		t.Fatal(err)
	}
	if r, _ := l.Allow(ctx, "hot", limit); !r.Allowed || r.Source != clientlib.FromServer {
		t.Errorf("after Reset: %+v", r)
	}
}

// The cache never admits what the server would have refused, and refuses
// only what it would have refused: with the same random traffic on two
// keys, one through the cache and one without, every decision matches.
func TestOverLimitCacheMatchesServer(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	sluicetest.FreezeClock(t, rdb)
	local := newFakeClock()
	clock := lockstep{t, rdb, local}
	cached := newLimiter(rdb, clientlib.WithOverLimitCache(64), clientlib.WithClock(local.Now))
	plain := newLimiter(rdb, clientlib.WithClock(local.Now))
	ctx := context.Background()
	limits := []clientlib.Limit{
		clientlib.GCRA(5, time.Second, 3),
		clientlib.SlidingWindow(4, 2*time.Second),
		clientlib.SlidingLog(4, 1500*time.Millisecond),
		clientlib.FixedWindow(3, time.Second),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	hits := 0
	for i := range 3000 {
		clock.advance(time.Duration(rng.IntN(40)) * time.Millisecond)
		li := rng.IntN(len(limits))
		cost := int64(1 + rng.IntN(2))
		// One key per limit: a key holds one family's state.
		a, err := cached.AllowN(ctx, "cached:"+strconv.Itoa(li), limits[li], cost)
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.AllowN(ctx, "plain:"+strconv.Itoa(li), limits[li], cost)
		if err != nil {
			t.Fatal(err)
		}
		if a.Source == clientlib.FromCache {
			hits++
		}
		if a.Allowed != b.Allowed {
			t.Fatalf("step %d (%v cost %d): cached %+v, server %+v", i, limits[li], cost, a, b)
		}
	}
	if hits < 100 {
		t.Errorf("the cache answered only %d times: the test proves little", hits)
	}
}
