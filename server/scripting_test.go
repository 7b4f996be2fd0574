package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

const scriptShards = 8

// keyOnShard is a key the engine keeps on shard s of scriptShards.
func keyOnShard(prefix string, s int) string {
	for i := 0; ; i++ {
		k := prefix + strconv.Itoa(i)
		if int(xxhash.Sum64String(k)&(scriptShards-1)) == s {
			return k
		}
	}
}

func startScripting(t *testing.T) (*sluicetest.Server, *server.Scripts) {
	scripts := server.NewScripts(nil)
	ts := sluicetest.Start(t, sluicetest.Options{
		Server: server.Config{Scripts: scripts},
		Engine: engine.Config{Shards: scriptShards, Scripts: scripts},
	})
	return ts, scripts
}

// TestScriptReachesUndeclaredKeys: a script may touch keys it did not
// declare. One above its hold extends the hold; one below it makes the
// script start over holding every shard, with what it wrote the first time
// rolled back, so each write happens exactly once.
func TestScriptReachesUndeclaredKeys(t *testing.T) {
	ts, _ := startScripting(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ts.Addr})
	defer rdb.Close()
	lo, hi := keyOnShard("lo", 0), keyOnShard("hi", scriptShards-1)
	const body = "redis.call('incr', KEYS[1]); redis.call('incr', ARGV[1]); return {redis.call('get', KEYS[1]), redis.call('get', ARGV[1])}"

	// Declared on the top shard, undeclared below: starts over.
	for round := int64(1); round <= 3; round++ {
		got, err := rdb.Eval(ctx, body, []string{hi}, lo).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{strconv.FormatInt(round, 10), strconv.FormatInt(round, 10)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %v, want %v (a rolled-back write must not count)", round, got, want)
		}
	}
	// Declared below, undeclared above: the hold grows.
	lo2, hi2 := keyOnShard("lo2-", 1), keyOnShard("hi2-", scriptShards-2)
	const body2 = "redis.call('incr', KEYS[1]); redis.call('incr', ARGV[1]); return redis.call('get', ARGV[1])"
	for round := int64(1); round <= 3; round++ {
		if got, err := rdb.Eval(ctx, body2, []string{lo2}, hi2).Int64(); err != nil || got != round {
			t.Fatalf("round %d: %d, %v", round, got, err)
		}
	}
	for k, want := range map[string]string{lo: "3", hi: "3", lo2: "3", hi2: "3"} {
		if got := rdb.Get(ctx, k).Val(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// KEYS inside a script sees every shard.
	n, err := rdb.Eval(ctx, "return #redis.call('keys', '*')", nil).Int64()
	if err != nil || n != 4 {
		t.Fatalf("KEYS in a script: %d, %v", n, err)
	}
}

// TestScriptsAcrossShardsUnderConcurrency runs scripts declaring random
// sets of keys over every shard, with undeclared keys among them, and
// plain INCRs, from many connections at once: no deadlock, and every
// increment counted exactly once.
func TestScriptsAcrossShardsUnderConcurrency(t *testing.T) {
	ts, _ := startScripting(t)
	ctx := context.Background()
	var keys []string
	for s := range scriptShards {
		keys = append(keys, keyOnShard(fmt.Sprintf("c%d-", s), s))
	}
	// Increments every key in KEYS and in ARGV, then checks that the sum
	// it sees did not change under it.
	const body = `
local before = 0
for _, k in ipairs(KEYS) do before = before + tonumber(redis.call('get', k) or '0') end
for _, k in ipairs(ARGV) do before = before + tonumber(redis.call('get', k) or '0') end
for _, k in ipairs(KEYS) do redis.call('incr', k) end
for _, k in ipairs(ARGV) do redis.call('incr', k) end
local after = 0
for _, k in ipairs(KEYS) do after = after + tonumber(redis.call('get', k)) end
for _, k in ipairs(ARGV) do after = after + tonumber(redis.call('get', k)) end
return after - before`
	const workers, rounds = 8, 150
	want := make([][]int64, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		want[w] = make([]int64, len(keys))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := redis.NewClient(&redis.Options{Addr: ts.Addr, PoolSize: 2})
			defer rdb.Close()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				if r.IntN(4) == 0 {
					k := r.IntN(len(keys))
					if err := rdb.Incr(ctx, keys[k]).Err(); err != nil {
						errs <- err
						return
					}
					want[w][k]++
					continue
				}
				perm := r.Perm(len(keys))
				declared, undeclared := perm[:1+r.IntN(3)], perm[4:4+r.IntN(3)]
				var ks, argv []string
				for _, i := range declared {
					ks = append(ks, keys[i])
					want[w][i]++
				}
				for _, i := range undeclared {
					argv = append(argv, keys[i])
					want[w][i]++
				}
				args := make([]any, len(argv))
				for i, a := range argv {
					args[i] = a
				}
				n, err := rdb.Eval(ctx, body, ks, args...).Int64()
				if err != nil {
					errs <- err
					return
				}
				if n != int64(len(ks)+len(argv)) {
					errs <- fmt.Errorf("a script saw its keys change under it: %d increments for %d keys", n, len(ks)+len(argv))
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("scripts across shards did not finish: deadlock?")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: ts.Addr})
	defer rdb.Close()
	for i, k := range keys {
		var total int64
		for w := range workers {
			total += want[w][i]
		}
		got, _ := rdb.Get(ctx, k).Int64()
		if got != total {
			t.Errorf("%s = %d, want %d", k, got, total)
		}
	}
}

// TestBusyScript: a script running past busy-reply-threshold makes its
// shard answer BUSY, leaves other shards alone, and stops at SCRIPT KILL;
// one that wrote cannot be killed and runs to its end.
func TestBusyScript(t *testing.T) {
	ts, _ := startScripting(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ts.Addr, MaxRetries: -1})
	defer rdb.Close()
	threshold := func(name, ms string) {
		t.Helper()
		if err := rdb.ConfigSet(ctx, name, ms).Err(); err != nil {
			t.Fatal(err)
		}
		if got := rdb.ConfigGet(ctx, "busy-reply-threshold").Val()["busy-reply-threshold"]; got != ms {
			t.Fatalf("busy-reply-threshold is %q after setting %s to %s", got, name, ms)
		}
	}
	threshold("busy-reply-threshold", "100")
	busyKey, freeKey := keyOnShard("busy", 3), keyOnShard("free", 5)
	rdb.Set(ctx, busyKey, "v", 0)
	rdb.Set(ctx, freeKey, "w", 0)

	loop := make(chan error, 1)
	go func() { loop <- rdb.Eval(ctx, "while true do end", []string{busyKey}).Err() }()
	waitBusy(t, rdb, busyKey)
	if got, err := rdb.Get(ctx, freeKey).Result(); err != nil || got != "w" {
		t.Fatalf("another shard while a script is busy: %q, %v", got, err)
	}
	if err := rdb.ScriptKill(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT KILL: %v", err)
	}
	select {
	case err := <-loop:
		if err == nil || !strings.Contains(err.Error(), "Script killed by user with SCRIPT KILL") {
			t.Fatalf("the killed script answered %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the killed script did not stop")
	}
	if got, err := rdb.Get(ctx, busyKey).Result(); err != nil || got != "v" {
		t.Fatalf("after SCRIPT KILL: %q, %v", got, err)
	}
	if err := rdb.ScriptKill(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOTBUSY") {
		t.Fatalf("SCRIPT KILL with nothing running: %v", err)
	}

	// A script that wrote: sized to run about two seconds here.
	const counting = "redis.call('set', KEYS[1], 'written'); local i = 0; while i < tonumber(ARGV[1]) do i = i + 1 end; return i"
	threshold("lua-time-limit", "0")
	start := time.Now()
	if err := rdb.Eval(ctx, counting, []string{busyKey}, 200000).Err(); err != nil {
		t.Fatal(err)
	}
	n := int64(200000 * (2 * time.Second) / max(time.Since(start), time.Millisecond))
	threshold("lua-time-limit", "100")
	result := make(chan int64, 1)
	go func() {
		got, err := rdb.Eval(ctx, counting, []string{busyKey}, n).Int64()
		if err != nil {
			t.Error(err)
		}
		result <- got
	}()
	waitBusy(t, rdb, busyKey)
	if err := rdb.ScriptKill(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "UNKILLABLE") {
		t.Fatalf("SCRIPT KILL of a script that wrote: %v", err)
	}
	if got := <-result; got != n {
		t.Fatalf("the unkillable script returned %d, want %d", got, n)
	}
}

// waitBusy polls key from a second connection until it answers BUSY. A
// command sent before the script turned busy waits behind it (it was
// queued on the shard), so each poll gives up after a moment.
func waitBusy(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	other := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	defer other.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		err := other.Get(context.Background(), key).Err()
		if err != nil && strings.HasPrefix(err.Error(), "BUSY ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the script's shard never answered BUSY")
}

// TestScriptRunsWithCallersPermissions: a script's commands are checked
// against the ACL rules of the user who sent it, with Redis's replies
// (compared byte for byte with redis-server's).
func TestScriptRunsWithCallersPermissions(t *testing.T) {
	ts, _ := startScripting(t)
	r := sluicetest.StartRedis(t)
	sl, rd := sluicetest.DialRaw(t, "tcp", ts.Addr), sluicetest.DialRaw(t, r.Network, r.Addr)
	both := func(args ...string) string {
		t.Helper()
		got, want := sl.Do(t, args...), rd.Do(t, args...)
		if got != want {
			t.Fatalf("%q:\n sluice %q\n redis  %q", args, got, want)
		}
		return got
	}
	both("ACL", "SETUSER", "limited", "on", ">pw", "~a*", "+@all", "-flushall")
	both("AUTH", "limited", "pw")
	both("EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "a1")
	both("EVAL", "return redis.pcall('set', ARGV[1], 'x')", "1", "a1", "b1")
	both("EVAL", "return redis.pcall('flushall')", "0")
	both("EVAL", "return redis.pcall('get', 'a1')", "0")
	both("EVAL", "return redis.call('set', ARGV[1], 'x')", "1", "a1", "b1")
	both("EVAL", "return 1", "1", "b1")
	both("EXISTS", "b1")
}
