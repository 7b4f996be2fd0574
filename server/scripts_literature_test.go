package server_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Limiter scripts of the kinds the rate-limiting literature publishes,
// written for this test, each driven with the same calls against Sluice
// and redis-server. Scripts on the caller's clock must match byte for
// byte, replies and final state; scripts on the server's clock (TIME) are
// driven in bursts far inside their windows, so their decisions must
// match too, and their stored times are compared to a second.

// tokenBucketCallerClock: a token bucket in a hash, refilled from the
// caller's clock (ARGV[3], ms).
const tokenBucketCallerClock = `
local rate, capacity, now, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(state[1]), tonumber(state[2])
if tokens == nil then tokens, ts = capacity, now end
tokens = math.min(capacity, tokens + (now - ts) * rate / 1000)
local allowed = 0
if tokens >= cost then tokens = tokens - cost; allowed = 1 end
redis.call('HMSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000))
return {allowed, math.floor(tokens), tostring(tokens)}
`

// tokenBucketServerClock: the same on the server's clock, with HSET and
// PEXPIRE.
const tokenBucketServerClock = `
local rate, capacity, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
local ts = tonumber(redis.call('HGET', KEYS[1], 'ts'))
if tokens == nil then tokens, ts = capacity, now end
tokens = math.min(capacity, tokens + (now - ts) * rate / 1000)
local allowed = tokens >= cost
if allowed then tokens = tokens - cost end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], 60000)
return {allowed, math.floor(tokens)}
`

// counterWithReset: a fixed-window counter and its reset time as two
// keys, made atomic by the script.
const counterWithReset = `
local limit, window, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reset = tonumber(redis.call('GET', KEYS[2]))
if reset == nil or reset <= now then
  reset = now + window
  redis.call('SET', KEYS[1], 0)
  redis.call('SET', KEYS[2], reset)
end
local n = redis.call('INCR', KEYS[1])
if n > limit then
  redis.call('DECR', KEYS[1])
  return {0, limit - n + 1, reset - now}
end
return {1, limit - n, reset - now}
`

// slidingLog: an exact sliding log on a sorted set.
const slidingLog = `
local limit, window, now, id = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, 0, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, id)
redis.call('PEXPIRE', KEYS[1], window)
return {1, limit - n - 1, 0}
`

func TestLiteratureScriptsMatchRedis(t *testing.T) {
	ts, _ := startScripting(t)
	r := sluicetest.StartRedis(t)
	sl, rd := sluicetest.DialRaw(t, "tcp", ts.Addr), sluicetest.DialRaw(t, r.Network, r.Addr)
	same := func(args ...string) string {
		t.Helper()
		got, want := sl.Do(t, args...), rd.Do(t, args...)
		if got != want {
			t.Fatalf("%.60q...:\n sluice %q\n redis  %q", args, got, want)
		}
		return got
	}
	// PTTLs are read a moment after each server set them.
	pttl := func(key string) {
		t.Helper()
		got, _ := strconv.Atoi(strings.Trim(sl.Do(t, "PTTL", key), ":\r\n"))
		want, _ := strconv.Atoi(strings.Trim(rd.Do(t, "PTTL", key), ":\r\n"))
		if got < want-50 || got > want+50 || (want < 0) != (got < 0) {
			t.Fatalf("PTTL %s: sluice %d, redis %d", key, got, want)
		}
	}
	ms := func(n int) string { return strconv.Itoa(1_700_000_000_000 + n) }

	// On the caller's clock: 2 tokens a second, capacity 5, costs 1-3,
	// calls 0-900 ms apart; fractional tokens stored as Lua formats them.
	now := 0
	for i := range 40 {
		now += (i * 37) % 900
		same("EVAL", tokenBucketCallerClock, "1", "tb:caller", "2", "5", ms(now), strconv.Itoa(1+i%3))
	}
	same("HGETALL", "tb:caller")
	pttl("tb:caller")

	now = 0
	for i := range 60 {
		now += (i * 53) % 700
		same("EVAL", counterWithReset, "2", "cw:n", "cw:reset", "7", "5000", ms(now))
		same("EVAL", slidingLog, "1", "sl:log", "6", "3000", ms(now), "req"+strconv.Itoa(i))
	}
	same("GET", "cw:n")
	same("GET", "cw:reset")
	same("ZRANGE", "sl:log", "0", "-1", "WITHSCORES")
	pttl("sl:log")

	// On the server's clock: a burst of 12 against capacity 8 at 1 a
	// second is 8 allowed then refusals on both, whatever the clocks
	// read; the stored times are each server's own.
	for range 12 {
		same("EVAL", tokenBucketServerClock, "1", "tb:server", "1", "8", "1")
	}
	for _, c := range []*sluicetest.RawConn{sl, rd} {
		v, err := difftest.Parse([]byte(c.Do(t, "HMGET", "tb:server", "tokens", "ts")))
		if err != nil || len(v.Items) != 2 {
			t.Fatalf("HMGET: %v %v", v, err)
		}
		if tok := v.Items[0].Str; !strings.HasPrefix(tok, "0") {
			t.Errorf("tokens left %q, want 0.something", tok)
		}
	}
	same("TYPE", "tb:server")
}
