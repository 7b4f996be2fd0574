package bench

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// startRedis starts a real redis-server for one test and stops it at
// cleanup. Without redis-server the test is skipped, except under CI, where
// a missing server is a failure.
func startRedis(t *testing.T) (*Server, *redis.Client) {
	t.Helper()
	sluicetest.Require(t, "redis-server")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := StartRedis(ctx, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2})
	t.Cleanup(func() {
		rdb.Close()
		if err := s.Close(); err != nil {
			t.Errorf("stop redis: %v", err)
		}
	})
	return s, rdb
}

func redisTarget(s *Server) Target { return Target{Kind: KindRedis, Addr: s.Addr} }

func TestRedisModesCountsAddUp(t *testing.T) {
	s, rdb := startRedis(t)
	const n = 2000
	for _, mode := range []string{"ping", "incr", "lua-gcra", "lua-sw", "lua-fw"} {
		t.Run(mode, func(t *testing.T) {
			res, err := Run(context.Background(), Config{
				Target: redisTarget(s), Mode: mode,
				Requests: n, Conns: 4, Pipeline: 8, Keys: 50,
			})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.Requests != n || res.Allowed+res.Limited+res.Errors != n {
				t.Fatalf("requests %d = allowed %d + limited %d + errors %d, want %d",
					res.Requests, res.Allowed, res.Limited, res.Errors, n)
			}
			if res.Errors != 0 || res.Unanswered != 0 || !res.OK() {
				t.Fatalf("errors %d, unanswered %d, first error %q", res.Errors, res.Unanswered, res.FirstError)
			}
			if got := res.Hist.TotalCount(); got != n {
				t.Fatalf("histogram holds %d latencies, want %d", got, n)
			}
			if res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P999 || res.Throughput <= 0 {
				t.Fatalf("implausible summary %+v, throughput %v", res.Latency, res.Throughput)
			}
		})
	}
	// Every INCR reached the server exactly once.
	keys, err := rdb.Keys(context.Background(), "sluice-bench:incr:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, k := range keys {
		v, err := rdb.Get(context.Background(), k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if sum != n {
		t.Fatalf("INCR counters sum to %d, want %d", sum, n)
	}
}

// With one key, a burst of 10 and a rate of one per hour, the GCRA script
// must admit exactly burst+1 requests however they are pipelined, and the
// window scripts exactly their limit.
func TestLuaLimitersAdmitExactly(t *testing.T) {
	s, _ := startRedis(t)
	for _, tc := range []struct {
		mode    string
		limit   Limit
		allowed int64
	}{
		{"lua-gcra", Limit{Count: 1, Period: 3600, Burst: 10}, 11},
		{"lua-sw", Limit{Count: 10, Period: 3600}, 10},
		{"lua-fw", Limit{Count: 10, Period: 3600}, 10},
		{"lua-gcra", Limit{Count: 1, Period: 3600, Burst: 10, Cost: 4}, 2}, // 11 units hold two costs of 4
	} {
		t.Run(tc.mode, func(t *testing.T) {
			res, err := Run(context.Background(), Config{
				Target: redisTarget(s), Mode: tc.mode, KeyPrefix: t.Name() + ":",
				Requests: 500, Conns: 4, Pipeline: 8, Keys: 1, Limit: tc.limit,
			})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.Allowed != tc.allowed || res.Limited != 500-tc.allowed || res.Errors != 0 {
				t.Fatalf("allowed %d, limited %d, errors %d (%s); want allowed %d",
					res.Allowed, res.Limited, res.Errors, res.FirstError, tc.allowed)
			}
		})
	}
}

// The GCRA script's reply follows redis-cell's field order.
func TestLuaGCRAReplyShape(t *testing.T) {
	_, rdb := startRedis(t)
	ctx := context.Background()
	args := []any{9, 10, 60, 1} // max_burst 9: limit 10, one per 6 s
	for i := range 11 {
		v, err := rdb.Eval(ctx, gcraScript, []string{"shape"}, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		limited, limit, remaining, retry, reset := v[0], v[1], v[2], v[3], v[4]
		if limit != 10 {
			t.Fatalf("limit %d, want 10", limit)
		}
		if i < 10 {
			// After i+1 admitted units the bucket empties in (i+1)*6 s.
			if limited != 0 || remaining != int64(9-i) || retry != -1 || reset < int64(i+1)*6000-50 || reset > int64(i+1)*6000 {
				t.Fatalf("request %d: %v", i+1, v)
			}
			continue
		}
		if limited != 1 || remaining != 0 || retry <= 0 || retry > 6000 || reset > 60000 {
			t.Fatalf("request 11: %v", v)
		}
	}
}

func TestHotKeyConcentratesLoad(t *testing.T) {
	s, _ := startRedis(t)
	res, err := Run(context.Background(), Config{
		Target: redisTarget(s), Mode: "lua-gcra", KeyPrefix: t.Name() + ":",
		Requests: 400, Conns: 2, Pipeline: 4, Keys: 1000, Hot: 1,
		Limit: Limit{Count: 1, Period: 3600, Burst: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 5 {
		t.Fatalf("all traffic on the hot key should admit 5, admitted %d", res.Allowed)
	}
}

func TestDurationAndOpenLoop(t *testing.T) {
	s, _ := startRedis(t)
	res, err := Run(context.Background(), Config{
		Target: redisTarget(s), Mode: "ping", Duration: 300 * time.Millisecond, Conns: 2, Pipeline: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed < 300*time.Millisecond || res.Elapsed > 3*time.Second || res.Requests == 0 {
		t.Fatalf("closed loop for 300ms: elapsed %v, %d requests", res.Elapsed, res.Requests)
	}

	res, err = Run(context.Background(), Config{
		Target: redisTarget(s), Mode: "ping", Duration: 500 * time.Millisecond, Conns: 4, Pipeline: 2, Rate: 2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2000/s for 0.5 s is 1000 requests, on a schedule.
	if res.Requests < 800 || res.Requests > 1000 {
		t.Fatalf("open loop at 2000/s for 500ms sent %d requests", res.Requests)
	}
}

// Commands the target does not know are counted as errors, and the first
// message is kept.
func TestErrorRepliesAreCounted(t *testing.T) {
	s, _ := startRedis(t)
	res, err := Run(context.Background(), Config{
		Target: redisTarget(s), Mode: "sl.check", Requests: 100, Conns: 2, Pipeline: 5,
	})
	if err != nil {
		t.Fatalf("error replies must not fail the run: %v", err)
	}
	if res.Errors != 100 || res.Requests != 100 || res.OK() {
		t.Fatalf("errors %d of %d, OK %v", res.Errors, res.Requests, res.OK())
	}
	if !strings.Contains(res.FirstError, "unknown command") {
		t.Fatalf("first error %q", res.FirstError)
	}
}

func TestUnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	res, err := Run(context.Background(), Config{Target: Target{Kind: KindRedis, Addr: addr}, Mode: "ping", Requests: 10})
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v", err)
	}
	if res.Failure == "" || res.Requests != 0 {
		t.Fatalf("result %+v", res)
	}
}

// A server that dies mid-run: the connection errors are reported, the
// replies already counted are kept.
func TestServerLostMidRun(t *testing.T) {
	s, _ := startRedis(t)
	ctx := context.Background()
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.cmd.Process.Kill()
	}()
	res, err := Run(ctx, Config{Target: redisTarget(s), Mode: "ping", Duration: 3 * time.Second, Conns: 2, Pipeline: 4})
	if err == nil {
		t.Fatal("run against a killed server succeeded")
	}
	if res.Requests == 0 || res.Elapsed > 2*time.Second {
		t.Fatalf("partial result lost: %d requests in %v (%v)", res.Requests, res.Elapsed, err)
	}
	// Close reports that the server was already gone.
	if err := s.Close(); err == nil {
		t.Fatal("Close of a killed server reported nothing")
	}
	s.stopErr = nil // already reported; keep the cleanup quiet
}

func TestCancelStopsRun(t *testing.T) {
	s, _ := startRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Config{Target: redisTarget(s), Mode: "ping", Duration: time.Minute, Conns: 4})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second || res.Requests == 0 {
		t.Fatalf("cancel took %v; %d requests kept", time.Since(start), res.Requests)
	}
}

func TestStartRedisTwiceUsesTwoPorts(t *testing.T) {
	a, _ := startRedis(t)
	b, _ := startRedis(t)
	if a.Addr == b.Addr {
		t.Fatalf("both servers on %s", a.Addr)
	}
	for _, s := range []*Server{a, b} {
		if _, port, _ := net.SplitHostPort(s.Addr); port == "" {
			t.Fatalf("bad addr %q", s.Addr)
		} else if p, _ := strconv.Atoi(port); p == 0 {
			t.Fatalf("bad port in %q", s.Addr)
		}
	}
}
