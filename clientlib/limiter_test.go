package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// rawResult is what a raw 5-field MS reply means, for comparison.
func rawResult(t *testing.T, v []int64) clientlib.Result {
	t.Helper()
	if len(v) != 5 {
		t.Fatalf("raw reply %v: want 5 fields", v)
	}
	ms := func(x int64) time.Duration {
		if x < 0 {
			return -1
		}
		return time.Duration(x) * time.Millisecond
	}
	return clientlib.Result{Allowed: v[0] == 0, Limit: v[1], Remaining: v[2], RetryAfter: ms(v[3]), ResetAfter: ms(v[4])}
}

// sameDecision compares the fields a reply carries; ResetAt is checked to
// be the receive time plus ResetAfter, within the test's own latency.
func sameDecision(t *testing.T, what string, got, want clientlib.Result, before time.Time) {
	t.Helper()
	if got.Source != clientlib.FromServer || got.Err != nil {
		t.Errorf("%s: source %v err %v, want server", what, got.Source, got.Err)
	}
	if got.Allowed != want.Allowed || got.Limit != want.Limit || got.Remaining != want.Remaining ||
		got.RetryAfter != want.RetryAfter || got.ResetAfter != want.ResetAfter {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
	if lo, hi := before.Add(got.ResetAfter), time.Now().Add(got.ResetAfter); got.ResetAt.Before(lo) || got.ResetAt.After(hi) {
		t.Errorf("%s: ResetAt %v not in [%v, %v]", what, got.ResetAt, lo, hi)
	}
}

// Every decision the Limiter returns must be exactly the server's reply to
// the equivalent raw command, for every family, decimal periods included.
func TestDecisionsMatchRawReplies(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	l := newLimiter(rdb)
	ctx := context.Background()
	sluicetest.FreezeClock(t, rdb)

	cases := []struct {
		name  string
		limit clientlib.Limit
		raw   func(key string, cost int64) []interface{}
	}{
		{"gcra-decimal", clientlib.GCRA(5, 500*time.Millisecond, 5),
			func(k string, c int64) []interface{} { return []interface{}{"CL.THROTTLE", k, 4, 5, "0.5", c, "MS"} }},
		{"gcra-burst", clientlib.GCRA(10, time.Minute, 3),
			func(k string, c int64) []interface{} { return []interface{}{"CL.THROTTLE", k, 2, 10, 60, c, "MS"} }},
		{"per-minute", clientlib.PerMinute(10),
			func(k string, c int64) []interface{} { return []interface{}{"CL.THROTTLE", k, 9, 10, 60, c, "MS"} }},
		{"sliding-window", clientlib.SlidingWindow(5, 2*time.Second),
			func(k string, c int64) []interface{} { return []interface{}{"SW.CHECK", k, 5, 2, c, "MS"} }},
		{"sliding-log", clientlib.SlidingLog(5, 1500*time.Millisecond),
			func(k string, c int64) []interface{} { return []interface{}{"SL.CHECK", k, 5, "1.5", c, "MS"} }},
		{"fixed-window", clientlib.FixedWindow(5, time.Second),
			func(k string, c int64) []interface{} { return []interface{}{"FW.CHECK", k, 5, 1, c, "MS"} }},
		{"fixed-window-ms", clientlib.FixedWindow(3, 250*time.Millisecond),
			func(k string, c int64) []interface{} { return []interface{}{"FW.CHECK", k, 3, "0.25", c, "MS"} }},
	}
	costs := []int64{1, 1, 2, 0, 1, 3, 1, 11, 1, 1}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mine, theirs := "lib:"+tc.name, "raw:"+tc.name
			allowed, limited, never := 0, 0, 0
			for i := range 40 {
				sluicetest.AdvanceClock(t, rdb, time.Duration(i*13%100)*time.Millisecond)
				cost := costs[i%len(costs)]
				before := time.Now()
				var got clientlib.Result
				var err error
				switch cost {
				case 1:
					got, err = l.Allow(ctx, mine, tc.limit)
				case 0:
					got, err = l.Peek(ctx, mine, tc.limit)
				default:
					got, err = l.AllowN(ctx, mine, tc.limit, cost)
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				raw, err := rdb.Do(ctx, tc.raw(theirs, cost)...).Int64Slice()
				if err != nil {
					t.Fatalf("step %d raw: %v", i, err)
				}
				sameDecision(t, fmt.Sprintf("step %d cost %d", i, cost), got, rawResult(t, raw), before)
				switch {
				case got.Allowed:
					allowed++
				case got.RetryAfter < 0:
					never++
				default:
					limited++
				}
			}
			// The sequence must exercise every kind of answer.
			if allowed == 0 || limited == 0 || never == 0 {
				t.Errorf("allowed %d, limited %d, never %d: the sequence misses a case", allowed, limited, never)
			}
		})
	}
}

// rawInfo reads LIMIT.INFO's flat array the way a reader of the spec would.
func rawInfo(t *testing.T, rdb redis.UniversalClient, key string) map[string]interface{} {
	t.Helper()
	v, err := rdb.Do(context.Background(), "LIMIT.INFO", key).Result()
	if err != nil {
		t.Fatalf("raw LIMIT.INFO %s: %v", key, err)
	}
	m := map[string]interface{}{}
	switch v := v.(type) {
	case map[interface{}]interface{}: // RESP3, go-redis's default
		for k, x := range v {
			m[k.(string)] = x
		}
	case []interface{}: // RESP2
		for i := 0; i+1 < len(v); i += 2 {
			m[v[i].(string)] = v[i+1]
		}
	}
	return m
}

func TestInfoRefundReset(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	l := newLimiter(rdb)
	ctx := context.Background()
	frozen := sluicetest.FreezeClock(t, rdb)

	lim := clientlib.PerMinute(10)
	for range 4 {
		if _, err := l.Allow(ctx, "a", lim); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "CL.THROTTLE", "b", 9, 10, 60, 1, "MS").Err(); err != nil {
			t.Fatal(err)
		}
	}

	info, err := l.Info(ctx, "a")
	if err != nil || info == nil {
		t.Fatalf("Info: %v %v", info, err)
	}
	raw := rawInfo(t, rdb, "a")
	if info.Family != clientlib.FamilyGCRA || raw["family"] != "gcra" {
		t.Errorf("family %v, raw %v", info.Family, raw["family"])
	}
	for k, v := range raw {
		switch x := v.(type) {
		case int64:
			if info.Fields[k] != x {
				t.Errorf("field %s = %d, raw %v", k, info.Fields[k], v)
			}
		case string:
			if k != "family" && info.Durations[k] == 0 {
				t.Errorf("field %s = %q, not in Durations %v", k, x, info.Durations)
			}
		}
	}
	if len(info.Fields)+len(info.Durations) != len(raw)-1 {
		t.Errorf("fields %v durations %v, raw %v", info.Fields, info.Durations, raw)
	}
	// The limit as it was written: 9 more than one, 10 per 60 s.
	if info.Fields["max_burst"] != 9 || info.Fields["count"] != 10 || info.Durations["period"] != time.Minute {
		t.Errorf("parameters %v %v, want max_burst 9, count 10, period 1m", info.Fields, info.Durations)
	}
	// Four units of six seconds each, on a frozen clock: the stored reset
	// is exactly 24 s ahead, and the typed fields agree with the raw ones.
	if want := time.UnixMilli(frozen + 24000); !info.ResetAt.Equal(want) || info.ResetAfter != 24*time.Second ||
		info.Remaining != 6 || info.Limit != 10 {
		t.Errorf("info %+v, want remaining 6 limit 10 reset at %v after 24s", info, want)
	}

	rem, ok, err := l.Refund(ctx, "a", 2)
	rawRem, rawErr := rdb.Do(ctx, "LIMIT.REFUND", "b", 2).Int64()
	if err != nil || rawErr != nil || !ok || rem != rawRem || rem != 8 {
		t.Errorf("Refund = %d %v %v; raw %d %v; want 8", rem, ok, err, rawRem, rawErr)
	}
	// No state: nothing is created, and that is not an error.
	rem, ok, err = l.Refund(ctx, "missing", 1)
	if err != nil || ok || rem != 0 {
		t.Errorf("Refund(missing) = %d %v %v", rem, ok, err)
	}
	if n, _ := rdb.Exists(ctx, "missing").Result(); n != 0 {
		t.Errorf("Refund created the key")
	}
	if info, err := l.Info(ctx, "missing"); info != nil || err != nil {
		t.Errorf("Info(missing) = %+v %v, want nil nil", info, err)
	}

	n, err := l.Reset(ctx, "a", "missing")
	rawN, rawErr := rdb.Do(ctx, "LIMIT.RESET", "b", "missing").Int64()
	if err != nil || rawErr != nil || n != 1 || rawN != 1 {
		t.Errorf("Reset = %d %v; raw %d %v; want 1", n, err, rawN, rawErr)
	}
	if info, err := l.Info(ctx, "a"); info != nil || err != nil {
		t.Errorf("Info after Reset = %+v %v", info, err)
	}

	// The window families report their own fields.
	sw := clientlib.SlidingWindow(100, time.Minute)
	if _, err := l.AllowN(ctx, "w", sw, 7); err != nil {
		t.Fatal(err)
	}
	info, err = l.Info(ctx, "w")
	if err != nil || info.Family != clientlib.FamilySlidingWindow || info.Fields["window_ms"] != 60000 ||
		info.Durations["window"] != time.Minute || info.Fields["current"] != 7 || info.Remaining != 93 || info.Limit != 100 {
		t.Errorf("Info(w) = %+v %v", info, err)
	}
}

func TestAllIsAllOrNothing(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	l := newLimiter(rdb)
	ctx := context.Background()
	sluicetest.FreezeClock(t, rdb)

	user, ip := clientlib.PerMinute(10), clientlib.SlidingWindow(3, time.Minute)
	for range 3 {
		if r, err := l.Allow(ctx, "ip:1", ip); err != nil || !r.Allowed {
			t.Fatalf("filling ip: %+v %v", r, err)
		}
		if err := rdb.Do(ctx, "SW.CHECK", "raw-ip:1", 3, 60, 1, "MS").Err(); err != nil {
			t.Fatal(err)
		}
	}

	res, err := l.All(ctx,
		clientlib.Request{Key: "user:1", Limit: user, Cost: 1},
		clientlib.Request{Key: "ip:1", Limit: ip, Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rdb.Do(ctx, "LIMIT.ALL", 2, "CL.THROTTLE", "raw-user:1", 9, 10, 60, 1, "MS", "SW.CHECK", "raw-ip:1", 3, 60, 1, "MS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed || res.Index != 1 || res.Source != clientlib.FromServer || raw[0].(int64) != 1 || raw[1].(int64) != 1 {
		t.Fatalf("All = %+v, raw %v", res, raw)
	}
	for i, sub := range raw[2].([]interface{}) {
		var v []int64
		for _, x := range sub.([]interface{}) {
			v = append(v, x.(int64))
		}
		sameDecision(t, fmt.Sprintf("limit %d", i), res.Results[i], rawResult(t, v), time.Now().Add(-time.Second))
	}

	// The user limit admitted on its own but was not charged.
	if info, err := l.Info(ctx, "user:1"); info != nil || err != nil {
		t.Errorf("user:1 has state after a refused All: %+v %v", info, err)
	}
	if r, err := l.Peek(ctx, "user:1", user); err != nil || r.Remaining != 10 {
		t.Errorf("Peek(user:1) = %+v %v, want 10 remaining", r, err)
	}

	// Once the ip limit has room, both are charged.
	if _, err := l.Reset(ctx, "ip:1"); err != nil {
		t.Fatal(err)
	}
	res, err = l.All(ctx,
		clientlib.Request{Key: "user:1", Limit: user, Cost: 2},
		clientlib.Request{Key: "ip:1", Limit: ip, Cost: 2})
	if err != nil || !res.Allowed || res.Index != -1 || res.Results[0].Remaining != 8 || res.Results[1].Remaining != 1 {
		t.Fatalf("All after reset = %+v %v", res, err)
	}
	if r, _ := l.Peek(ctx, "user:1", user); r.Remaining != 8 {
		t.Errorf("user:1 remaining %d, want 8", r.Remaining)
	}
	if r, _ := l.Peek(ctx, "ip:1", ip); r.Remaining != 1 {
		t.Errorf("ip:1 remaining %d, want 1", r.Remaining)
	}
}

// Argument errors are the caller's bug: they come back as errors, never
// masked by the failure policy, and never raise the alarm.
func TestErrorsAreNotMasked(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	hook := &countHook{}
	rdb.AddHook(hook)
	alarms := 0
	l := newLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailOpen),
		clientlib.WithAlarm(func(clientlib.Alarm) { alarms++ }))
	ctx := context.Background()

	if err := rdb.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "sw", clientlib.SlidingWindow(5, time.Second)); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		call func() error
		want string
	}{
		{"string key", func() error { _, err := l.Allow(ctx, "str", clientlib.PerMinute(1)); return err }, "WRONGTYPE"},
		{"other family", func() error { _, err := l.Allow(ctx, "sw", clientlib.PerMinute(1)); return err }, "WRONGTYPE"},
		{"server-side bound", func() error {
			_, err := l.Allow(ctx, "log", clientlib.SlidingLog(100000, time.Second))
			return err
		}, "ERR invalid limit"},
		{"all", func() error {
			_, err := l.All(ctx, clientlib.Request{Key: "str", Limit: clientlib.PerMinute(1), Cost: 1})
			return err
		}, "WRONGTYPE"},
		{"refund", func() error { _, _, err := l.Refund(ctx, "str", 1); return err }, "WRONGTYPE"},
	}
	for _, c := range checks {
		err := c.call()
		var re redis.Error
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.As(err, &re) || errors.Is(err, clientlib.ErrUnavailable) {
			t.Errorf("%s: err %v, want a server error starting %q", c.name, err, c.want)
		}
	}
	if st := l.Stats(); st.PolicyAnswers != 0 || st.Alarms != 0 || alarms != 0 {
		t.Errorf("stats %+v alarms %d: an error reply triggered the policy", st, alarms)
	}

	// Caught before sending: nothing reaches the server.
	sent := hook.count("cl.throttle")
	local := []struct {
		name string
		call func() error
	}{
		{"zero rate", func() error { _, err := l.Allow(ctx, "k", clientlib.PerMinute(0)); return err }},
		{"zero period", func() error { _, err := l.Allow(ctx, "k", clientlib.GCRA(1, 0, 1)); return err }},
		{"negative burst", func() error { _, err := l.Allow(ctx, "k", clientlib.GCRA(1, time.Second, -1)); return err }},
		{"rate too high", func() error { _, err := l.Allow(ctx, "k", clientlib.PerSecond(2e9)); return err }},
		{"negative cost", func() error { _, err := l.AllowN(ctx, "k", clientlib.PerMinute(1), -1); return err }},
		{"no requests", func() error { _, err := l.All(ctx); return err }},
		{"same key twice", func() error {
			q := clientlib.Request{Key: "k", Limit: clientlib.PerMinute(1), Cost: 1}
			_, err := l.All(ctx, q, q)
			return err
		}},
	}
	for _, c := range local {
		if err := c.call(); !errors.Is(err, clientlib.ErrInvalidLimit) {
			t.Errorf("%s: err %v, want ErrInvalidLimit", c.name, err)
		}
	}
	if hook.count("cl.throttle") != sent || hook.count("limit.all") != 1 {
		t.Errorf("invalid calls reached the server")
	}
}

// A caller that gives up is not an outage.
func TestCallerCancellationIsNotAnOutage(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	l := newLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailOpen))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Allow(ctx, "k", clientlib.PerMinute(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if st := l.Stats(); st.Degraded || st.PolicyAnswers != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestLimitWireForm(t *testing.T) {
	cases := []struct {
		limit  clientlib.Limit
		max    int64
		window time.Duration
		str    string
	}{
		{clientlib.PerMinute(10), 10, time.Minute, "gcra 10 per 1m0s, burst 10"},
		{clientlib.GCRA(10, time.Minute, 3), 3, 18 * time.Second, "gcra 10 per 1m0s, burst 3"},
		{clientlib.SlidingWindow(100, time.Hour), 100, time.Hour, "sliding-window 100 per 1h0m0s"},
		{clientlib.FixedWindow(5, 1500*time.Millisecond), 5, 1500 * time.Millisecond, "fixed-window 5 per 1.5s"},
	}
	for _, c := range cases {
		if c.limit.Max() != c.max || c.limit.Window() != c.window || c.limit.String() != c.str {
			t.Errorf("%v: max %d window %v, want %d %v %q", c.limit, c.limit.Max(), c.limit.Window(), c.max, c.window, c.str)
		}
	}
}
