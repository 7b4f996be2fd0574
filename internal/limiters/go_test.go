package limiters

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// goScenario is a Go library's scenario: it drives the library through
// lib (a go-redis client at its defaults, RESP3, with a hook recording
// what the library sent) and reads stored state back through plain, which
// the hook does not see.
type goScenario func(ctx context.Context, t *testing.T, lib, plain *redis.Client, tr *transcript)

// runGo runs a scenario against Redis, then Sluice, and returns both
// transcripts (normalized), the Redis one first; native as differential's. The hook's record of the
// commands the library sent, with each reply's error or, for scripts, the
// reply's shape, is the transcript's last step ("wire").
func runGo(t *testing.T, native []string, scenario goScenario) (redisTr, sluiceTr []any) {
	t.Helper()
	return differential(t, native, func(e endpoint) []any {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		opts := func() *redis.Options {
			return &redis.Options{Network: e.network, Addr: e.addr, MaxRetries: -1,
				ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
		}
		lib, plain := redis.NewClient(opts()), redis.NewClient(opts())
		defer lib.Close()
		defer plain.Close()
		w := &wire{}
		lib.AddHook(w)
		var tr transcript
		start := time.Now()
		scenario(ctx, t, lib, plain, &tr)
		t.Logf("%s: the scenario took %v", e.name, time.Since(start).Round(time.Millisecond))
		tr.add("wire", "ops", w.ops)
		return normalize(t, tr.steps)
	})
}

// wire is a go-redis hook that records each command a library sends:
// its name and the outcome ("ok", "nil", the error's text), and for
// EVAL/EVALSHA the shape of the reply (see shape).
type wire struct{ ops []string }

func (w *wire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *wire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.record(cmd, err)
		return err
	}
}

func (w *wire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			w.record(c, c.Err())
		}
		return err
	}
}

// record notes cmd and err, the error its hook saw (go-redis sets a
// command's own error after the hooks have run).
func (w *wire) record(cmd redis.Cmder, err error) {
	name := strings.ToLower(cmd.Name())
	if name == "hello" || name == "client" {
		// The connection's setup, not the library's doing (and Sluice
		// knows CLIENT SETINFO, which Redis 7.0 refuses).
		return
	}
	switch {
	case err == redis.Nil: //nolint:errorlint // go-redis's Nil matches other errors with errors.Is
		w.ops = append(w.ops, name+" nil")
	case err != nil:
		w.ops = append(w.ops, name+" error: "+err.Error())
	case name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro":
		v, _ := cmd.(*redis.Cmd)
		w.ops = append(w.ops, name+" "+shape(v.Val()))
	default:
		w.ops = append(w.ops, name+" ok")
	}
}

// shape describes a script's reply as go-redis decoded it, types and the
// values that do not depend on the clock: integers below 1000 as they are
// (counts; the scenarios' times in milliseconds are all 1000 or more, and
// show as "int"), strings by whether they are numbers as Lua's tostring
// writes them (%.14g) or as a Lua number given to redis.call is written
// (%.17g).
func shape(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case int64:
		if x >= 1000 || x <= -1000 {
			return "int"
		}
		return strconv.FormatInt(x, 10)
	case string:
		f, err := strconv.ParseFloat(x, 64)
		switch {
		case err != nil:
			return strconv.Quote(x)
		case fmt.Sprintf("%.14g", f) == x:
			return "number14g"
		case fmt.Sprintf("%.17g", f) == x:
			return "number17g"
		}
		return "number?" + strconv.Quote(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = shape(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprintf("%T", v)
}

// is17g tells whether s is a number written as Redis writes a Lua number
// passed to redis.call (C's %.17g, which Go's %.17g matches).
func is17g(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && fmt.Sprintf("%.17g", f) == s
}

// serverSeconds is the server's TIME in seconds.
func serverSeconds(ctx context.Context, rdb *redis.Client) float64 {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return -1
	}
	return float64(now.UnixMicro()) / 1e6
}

// ms is a duration in milliseconds, -1 kept as -1 (the libraries' "none").
func ms(d time.Duration) any {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// readBack records, under name, a key's stored string, its TTL (seconds)
// and PTTL (milliseconds), read with the same commands on both servers.
func readBack(ctx context.Context, plain *redis.Client, tr *transcript, name, key string) {
	v, err := plain.Get(ctx, key).Result()
	ttl, _ := plain.Do(ctx, "TTL", key).Int64()
	pttl, _ := plain.Do(ctx, "PTTL", key).Int64()
	typ, _ := plain.Type(ctx, key).Result()
	tr.add(name, "value", v, "err", errText(err), "type", typ, "ttl_s", ttl, "pttl_ms", pttl)
}

// go-redis/redis_rate v10: GCRA in one script per call (EVALSHA, then
// EVAL on NOSCRIPT), the server's TIME, the state a float TAT string with
// EX. Limits whose emission interval and burst offset are whole seconds
// or halves keep the script's float arithmetic exact (TIME is about
// 3.1e8 s after its 2017 epoch, where doubles step by 2^-24 s), so
// remaining counts do not depend on the microsecond.
func TestRedisRate(t *testing.T) {
	redisTr, sluiceTr := runGo(t, []string{"redis_rate_allown", "redis_rate_allowatmost"}, func(ctx context.Context, t *testing.T, lib, plain *redis.Client, tr *transcript) {
		lim := redis_rate.NewLimiter(lib)
		rec := func(name string, res *redis_rate.Result, err error) {
			if err != nil {
				tr.add(name, "err", err.Error())
				return
			}
			tr.add(name, "allowed", res.Allowed, "remaining", res.Remaining,
				"retry_after_ms", ms(res.RetryAfter), "reset_after_ms", ms(res.ResetAfter))
		}
		// PerMinute(5): an emission interval of 12 s, a burst of 5.
		for i := 1; i <= 6; i++ {
			res, err := lim.Allow(ctx, "alice", redis_rate.PerMinute(5))
			rec(fmt.Sprintf("allow alice %d", i), res, err)
		}
		tat, err := plain.Get(ctx, "rate:alice").Result()
		f, _ := strconv.ParseFloat(tat, 64)
		now := serverSeconds(ctx, plain) - 1483228800
		ttl, _ := plain.TTL(ctx, "rate:alice").Result()
		tr.add("stored alice", "err", errText(err), "tat_is_17g", is17g(tat),
			"tat_ahead_ms", int64((f-now)*1000), "ttl_s", int64(ttl/time.Second))

		// AllowN: 10 a minute (6 s apart), burst 10; a cost of 0 reads.
		bob := redis_rate.Limit{Rate: 10, Burst: 10, Period: time.Minute}
		for i, n := range []int{4, 4, 0, 4, 2} {
			res, err := lim.AllowN(ctx, "bob", bob, n)
			rec(fmt.Sprintf("allowN bob %d (%d)", i+1, n), res, err)
		}
		// AllowAtMost: grants what is left when less than asked.
		for i := 1; i <= 4; i++ {
			res, err := lim.AllowAtMost(ctx, "carol", redis_rate.PerMinute(10), 4)
			rec(fmt.Sprintf("allowAtMost carol %d", i), res, err)
		}
		// PerSecond(2): 0.5 s apart, burst 2; refused, then whole again
		// after 1.1 s.
		for i := 1; i <= 3; i++ {
			res, err := lim.Allow(ctx, "dave", redis_rate.PerSecond(2))
			rec(fmt.Sprintf("allow dave %d", i), res, err)
		}
		time.Sleep(1100 * time.Millisecond)
		res, err := lim.Allow(ctx, "dave", redis_rate.PerSecond(2))
		rec("allow dave after 1.1s", res, err)

		// Reset deletes the key; the next request starts afresh.
		tr.add("reset alice", "err", errText(lim.Reset(ctx, "alice")))
		n, _ := plain.Exists(ctx, "rate:alice").Result()
		tr.add("alice exists after reset", "n", n)
		res, err = lim.Allow(ctx, "alice", redis_rate.PerMinute(5))
		rec("allow alice after reset", res, err)

		// A rate of 0 makes the script divide by zero: SET ... EX inf is
		// refused inside the script, and the script's error is the reply.
		res, err = lim.Allow(ctx, "zero", redis_rate.Limit{Period: time.Minute})
		rec("allow with a zero rate", res, err)
	})
	noErrors(t, redisTr, "allow with a zero rate")
	expect(t, redisTr, map[string]any{
		"allow alice 1/remaining": 4, "allow alice 5/remaining": 0, "allow alice 5/allowed": 1,
		"allow alice 6/allowed": 0, "allow alice 6/remaining": 0,
		"stored alice/tat_is_17g":    true,
		"allowN bob 1 (4)/remaining": 6, "allowN bob 2 (4)/remaining": 2, "allowN bob 3 (0)/allowed": 0,
		"allowN bob 3 (0)/remaining": 2, "allowN bob 4 (4)/allowed": 0, "allowN bob 5 (2)/allowed": 2,
		"allowAtMost carol 2/remaining": 2, "allowAtMost carol 3/allowed": 2, "allowAtMost carol 4/allowed": 0,
		"allow dave 3/allowed": 0, "allow dave after 1.1s/allowed": 1, "allow dave after 1.1s/remaining": 1,
		"alice exists after reset/n": 0, "allow alice after reset/remaining": 4,
		"allow with a zero rate/err": "ERR value is not an integer or out of range script: f52a5b566060d79fd321d695df55bc918339c4aa, on @user_script:55.",
	})
	expectRange(t, redisTr, "allow alice 6/retry_after_ms", 11000, 12000)
	expectRange(t, redisTr, "allow alice 6/reset_after_ms", 59000, 60000)
	expectRange(t, redisTr, "stored alice/tat_ahead_ms", 59000, 60000)
	compareTranscripts(t, redisTr, sluiceTr)
}

// ulule/limiter v3 with its redis store: a fixed window counter in two
// scripts loaded with SCRIPT LOAD when the store is made, run with
// EVALSHA (INCRBY, PEXPIRE on the first hit, PTTL), DEL for Reset.
func TestUluleLimiter(t *testing.T) {
	redisTr, sluiceTr := runGo(t, []string{"ulule_incr", "ulule_peek"}, func(ctx context.Context, t *testing.T, lib, plain *redis.Client, tr *transcript) {
		store, err := ulredis.NewStoreWithOptions(lib, limiter.StoreOptions{Prefix: "limiter"})
		tr.add("new store", "err", errText(err))
		if err != nil {
			return
		}
		l := limiter.New(store, limiter.Rate{Period: time.Minute, Limit: 5})
		rec := func(name string, c limiter.Context, err error) {
			if err != nil {
				tr.add(name, "err", err.Error())
				return
			}
			tr.add(name, "limit", c.Limit, "remaining", c.Remaining, "reached", c.Reached,
				"reset_in_s", c.Reset-time.Now().Unix())
		}
		for i := 1; i <= 6; i++ {
			c, err := l.Get(ctx, "alice")
			rec(fmt.Sprintf("get alice %d", i), c, err)
		}
		c, err := l.Peek(ctx, "alice")
		rec("peek alice", c, err)
		readBack(ctx, plain, tr, "stored alice", "limiter:alice")
		c, err = l.Peek(ctx, "nobody")
		rec("peek nobody", c, err)
		n, _ := plain.Exists(ctx, "limiter:nobody").Result()
		tr.add("nobody exists after peek", "n", n)
		for i := 1; i <= 2; i++ {
			c, err := l.Increment(ctx, "bob", 3)
			rec(fmt.Sprintf("increment bob 3 (%d)", i), c, err)
		}
		c, err = l.Reset(ctx, "alice")
		rec("reset alice", c, err)
		c, err = l.Get(ctx, "alice")
		rec("get alice after reset", c, err)
		readBack(ctx, plain, tr, "stored alice after reset", "limiter:alice")

		// A window of 1.5 s: PEXPIRE in milliseconds.
		short := limiter.New(store, limiter.Rate{Period: 1500 * time.Millisecond, Limit: 2})
		for i := 1; i <= 3; i++ {
			c, err := short.Get(ctx, "carol")
			rec(fmt.Sprintf("get carol %d", i), c, err)
		}
		readBack(ctx, plain, tr, "stored carol", "limiter:carol")

		// The scripts flushed: EVALSHA answers NOSCRIPT, the store loads
		// them again and retries.
		tr.add("script flush", "err", errText(plain.ScriptFlush(ctx).Err()))
		c, err = l.Get(ctx, "dave")
		rec("get dave after flush", c, err)
	})
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"get alice 1/remaining": 4, "get alice 5/remaining": 0, "get alice 5/reached": false,
		"get alice 6/reached": true, "peek alice/reached": true, "stored alice/value": "6",
		"peek nobody/remaining": 5, "nobody exists after peek/n": 0,
		"increment bob 3 (1)/remaining": 2, "increment bob 3 (2)/reached": true,
		"get alice after reset/remaining": 4, "stored alice after reset/value": "1",
		"get carol 3/reached": true, "stored carol/value": "3",
		"get dave after flush/remaining": 4,
	})
	expectRange(t, redisTr, "stored alice/pttl_ms", 58000, 60000)
	expectRange(t, redisTr, "stored carol/pttl_ms", 500, 1500)
	compareTranscripts(t, redisTr, sluiceTr)
}

// throttled/throttled v2 with store/goredisstore.v9: GCRA in the client
// (the server's TIME and GET in a pipeline, SETNX and EXPIRE for a new
// key, a compare-and-swap script with SETEX for an old one, whose missing
// key is an error reply the store recognises by its text).
func TestThrottled(t *testing.T) {
	redisTr, sluiceTr := runGo(t, []string{"throttled_cas"}, func(ctx context.Context, t *testing.T, lib, plain *redis.Client, tr *transcript) {
		store, err := goredisstore.NewCtx(lib, "throttled:")
		if err != nil {
			t.Fatal(err)
		}
		// 10 a minute (6 s apart), a burst of 4 beyond the first: 5.
		rl, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: throttled.PerMin(10), MaxBurst: 4})
		if err != nil {
			t.Fatal(err)
		}
		rec := func(name string, limited bool, r throttled.RateLimitResult, err error) {
			if err != nil {
				tr.add(name, "err", err.Error())
				return
			}
			tr.add(name, "limited", limited, "limit", r.Limit, "remaining", r.Remaining,
				"reset_after_ms", ms(r.ResetAfter), "retry_after_ms", ms(r.RetryAfter))
		}
		for i := 1; i <= 6; i++ {
			limited, r, err := rl.RateLimitCtx(ctx, "alice", 1)
			rec(fmt.Sprintf("alice %d", i), limited, r, err)
		}
		limited, r, err := rl.RateLimitCtx(ctx, "alice", 0)
		rec("alice quantity 0", limited, r, err)
		tat, err := plain.Get(ctx, "throttled:alice").Int64()
		now := serverSeconds(ctx, plain)
		ttl, _ := plain.TTL(ctx, "throttled:alice").Result()
		tr.add("stored alice", "err", errText(err),
			"tat_ahead_ms", int64(float64(tat)/1e6-now*1000), "ttl_s", int64(ttl/time.Second))

		for i := 1; i <= 3; i++ {
			limited, r, err := rl.RateLimitCtx(ctx, "bob", 2)
			rec(fmt.Sprintf("bob quantity 2 (%d)", i), limited, r, err)
		}

		// The store's own operations.
		ok, err := store.CompareAndSwapWithTTL(ctx, "missing", 1, 2, time.Minute)
		tr.add("cas a missing key", "swapped", ok, "err", errText(err))
		ok, err = store.SetIfNotExistsWithTTL(ctx, "cas", 10, time.Minute)
		tr.add("set cas", "set", ok, "err", errText(err))
		ok, err = store.SetIfNotExistsWithTTL(ctx, "cas", 11, time.Minute)
		tr.add("set cas again", "set", ok, "err", errText(err))
		ok, err = store.CompareAndSwapWithTTL(ctx, "cas", 11, 12, time.Minute)
		tr.add("cas a wrong old value", "swapped", ok, "err", errText(err))
		ok, err = store.CompareAndSwapWithTTL(ctx, "cas", 10, 12, 90*time.Second)
		tr.add("cas", "swapped", ok, "err", errText(err))
		readBack(ctx, plain, tr, "stored cas", "throttled:cas")
		v, now2, err := store.GetWithTime(ctx, "cas")
		tr.add("get cas with time", "value", v, "err", errText(err), "clock_skew_s", time.Since(now2).Abs().Seconds())
		v, _, err = store.GetWithTime(ctx, "nothing")
		tr.add("get a missing key with time", "value", v, "err", errText(err))
	})
	noErrors(t, redisTr)
	expect(t, redisTr, map[string]any{
		"alice 1/limited": false, "alice 1/limit": 5, "alice 1/remaining": 4, "alice 1/retry_after_ms": -1,
		"alice 5/limited": false, "alice 5/remaining": 0,
		"alice 6/limited": true, "alice 6/remaining": 0, "alice quantity 0/limited": false,
		"bob quantity 2 (1)/remaining": 3, "bob quantity 2 (2)/remaining": 1, "bob quantity 2 (3)/limited": true,
		"cas a missing key/swapped": false, "cas a missing key/err": nil,
		"set cas/set": true, "set cas again/set": false, "cas a wrong old value/swapped": false,
		"cas/swapped": true, "stored cas/value": "12", "get cas with time/value": 12,
		"get a missing key with time/value": -1,
	})
	expectRange(t, redisTr, "alice 6/retry_after_ms", 5000, 6000)
	expectRange(t, redisTr, "stored alice/tat_ahead_ms", 29000, 30000)
	expectRange(t, redisTr, "stored cas/ttl_s", 89, 90)
	compareTranscripts(t, redisTr, sluiceTr)
}
