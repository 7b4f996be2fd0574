package bench

import (
	"bytes"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// Library modes: the scripts that real limiter libraries send, byte for
// byte as they send them, on the same key shapes, with the same arguments,
// the same command spelling and the same reaction to NOSCRIPT. Their wire
// traffic was captured from the libraries themselves (testdata/libcapture)
// and a test replays the capture's scenario here and compares the bytes.
//
// Each embedded file carries a header of Lua comments naming its source; the
// header ends at headerEnd and is not part of what is sent.

var (
	//go:embed scripts/redis_rate_allown.lua
	redisRateFile string
	//go:embed scripts/redis_rate_allowatmost.lua
	redisRateAtMostFile string
	//go:embed scripts/rlflex_incr_ttl.lua
	rlflexFile string
	//go:embed scripts/rate_limit_redis_increment.lua
	rateLimitRedisIncrFile string
	//go:embed scripts/rate_limit_redis_get.lua
	rateLimitRedisGetFile string
	//go:embed scripts/ulule_incr.lua
	ululeIncrFile string
	//go:embed scripts/ulule_peek.lua
	ululePeekFile string
	//go:embed scripts/fastify_incr.lua
	fastifyIncrFile string
	//go:embed scripts/limits_incr_expire.lua
	limitsIncrExpireFile string
	//go:embed scripts/limits_acquire_moving_window.lua
	limitsAcquireMovingFile string
)

const headerEnd = "-- sluice-bench: end of header\n"

// scriptBody is what follows an embedded file's header.
func scriptBody(file string) string {
	_, body, ok := strings.Cut(file, headerEnd)
	if !ok {
		panic("bench: embedded library script without its header marker")
	}
	return body
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// noScriptPolicy is what a library does when EVALSHA answers NOSCRIPT.
type noScriptPolicy uint8

const (
	// resendEval sends the same call again as EVAL with the script's text
	// (go-redis Script.Run; ioredis custom commands).
	resendEval noScriptPolicy = iota
	// reloadThenEvalsha sends SCRIPT LOAD of the scripts in reload, then
	// the same EVALSHA again (rate-limit-redis, ulule/limiter, redis-py's
	// Script).
	reloadThenEvalsha
)

// scriptLoadUpper is SCRIPT LOAD as most clients spell it.
var scriptLoadUpper = [2]string{"SCRIPT", "LOAD"}

// libScript is one library's limiter call.
type libScript struct {
	source string // library and version, for messages
	body   string // the script, exactly as the library sends it
	sha    string
	// keyPrefix is what the library puts before the caller's key.
	keyPrefix string
	// eval and evalsha are the command names as the library spells them.
	eval, evalsha string
	// evalFirst: the first call on each connection is EVAL, later ones
	// EVALSHA, and a NOSCRIPT makes the next call EVAL again (ioredis
	// tracks per socket whether it sent the script).
	evalFirst  bool
	onNoScript noScriptPolicy
	// load lists the scripts SCRIPT LOADed once at the start of a run, as
	// the library does when it starts (rate-limit-redis's init, ulule's
	// NewStore).
	load []string
	// reload lists the scripts a NOSCRIPT makes the library SCRIPT LOAD, in
	// order, before it repeats the EVALSHA (reloadThenEvalsha). Default:
	// the call's own script.
	reload []string
	// scriptLoad is SCRIPT LOAD as the library spells it, at the start and
	// after NOSCRIPT. Default scriptLoadUpper.
	scriptLoad [2]string
	// keySuffix, when set, returns what the library puts after the
	// caller's key for a limit (limits' key_for). Called only for a limit
	// args accepts.
	keySuffix func(Limit) string
	// clock: the first argument after the key is the client's clock,
	// Python's time.time() as redis-py writes a float (repr), taken once per
	// batch when the batch is written; args returns the arguments after it.
	clock bool
	// args returns the arguments after the key for a limit, or why the
	// library cannot express it.
	args func(Limit) ([]string, error)
	// decide counts one reply: allowed or refused, or an error with a
	// description. With check it also verifies the whole reply's shape.
	decide func(resp redcon.RESP, lim Limit, check bool) (outcome, string)
}

var (
	redisRateLib = &libScript{
		source:    "go-redis/redis_rate v10.0.1",
		body:      scriptBody(redisRateFile),
		keyPrefix: "rate:",
		eval:      "eval", evalsha: "evalsha",
		onNoScript: resendEval,
		args:       redisRateArgs,
		decide:     redisRateDecide,
	}
	redisRateAtMostLib = &libScript{
		source:    "go-redis/redis_rate v10.0.1 AllowAtMost",
		body:      scriptBody(redisRateAtMostFile),
		keyPrefix: "rate:",
		eval:      "eval", evalsha: "evalsha",
		onNoScript: resendEval,
		args:       redisRateArgs,
		decide:     redisRateAtMostDecide,
	}
	rlflexLib = &libScript{
		source:    "rate-limiter-flexible 11.4.0 RateLimiterRedis (ioredis)",
		body:      scriptBody(rlflexFile),
		keyPrefix: "rlflx:",
		eval:      "eval", evalsha: "evalsha",
		evalFirst:  true,
		onNoScript: resendEval,
		args:       rlflexArgs,
		decide:     rlflexDecide,
	}
	rateLimitRedisLib = &libScript{
		source:    "rate-limit-redis 6.0.1 (express-rate-limit)",
		body:      scriptBody(rateLimitRedisIncrFile),
		keyPrefix: "rl:",
		eval:      "EVAL", evalsha: "EVALSHA",
		onNoScript: reloadThenEvalsha,
		load:       []string{scriptBody(rateLimitRedisIncrFile), scriptBody(rateLimitRedisGetFile)},
		args:       rateLimitRedisArgs,
		decide:     rateLimitRedisDecide,
	}
	// ululeLib: NewStore SCRIPT LOADs both of the store's scripts (go-redis
	// spells it "script" "load"); Increment sends EVALSHA only, and on
	// NOSCRIPT loads both scripts again and repeats the EVALSHA. The key is
	// the store's Prefix ("limiter", limiter.DefaultPrefix), ":", the key.
	ululeLib = &libScript{
		source:    "ulule/limiter v3.11.2 redis store (go-redis)",
		body:      scriptBody(ululeIncrFile),
		keyPrefix: "limiter:",
		eval:      "eval", evalsha: "evalsha",
		onNoScript: reloadThenEvalsha,
		scriptLoad: [2]string{"script", "load"},
		load:       []string{scriptBody(ululeIncrFile), scriptBody(ululePeekFile)},
		reload:     []string{scriptBody(ululeIncrFile), scriptBody(ululePeekFile)},
		args:       ululeArgs,
		decide:     ululeDecide,
	}
	// fastifyLib: RedisStore defines the script with ioredis defineCommand,
	// the same ioredis Script as rate-limiter-flexible's: eval on a
	// connection's first call, evalsha after, eval again after NOSCRIPT.
	// The key is the store's key ('fastify-rate-limit-', the plugin's
	// default nameSpace) and the key generator's key.
	fastifyLib = &libScript{
		source:    "@fastify/rate-limit 11.2.0 RedisStore (ioredis)",
		body:      scriptBody(fastifyIncrFile),
		keyPrefix: "fastify-rate-limit-",
		eval:      "eval", evalsha: "evalsha",
		evalFirst:  true,
		onNoScript: resendEval,
		args:       fastifyArgs,
		decide:     fastifyDecide,
	}
	// limitsFixedLib: RedisStorage.incr through redis-py's register_script:
	// EVALSHA (redis-py sends "EVALSHA", and "SCRIPT LOAD" as two words),
	// nothing loaded beforehand; on NOSCRIPT, SCRIPT LOAD of the text and
	// the same EVALSHA again. The key is RateLimitItem.key_for:
	// "LIMITER/" (the default namespace), the identifier, then
	// "/amount/multiples/granularity".
	limitsFixedLib = &libScript{
		source:    "limits 2.8.0 FixedWindowRateLimiter, RedisStorage (redis-py 4.3.4)",
		body:      scriptBody(limitsIncrExpireFile),
		keyPrefix: "LIMITER/",
		keySuffix: limitsKeySuffix,
		eval:      "EVAL", evalsha: "EVALSHA",
		onNoScript: reloadThenEvalsha,
		args:       limitsFixedArgs,
		decide:     limitsFixedDecide,
	}
	// limitsMovingLib: RedisStorage.acquire_entry (MovingWindowRateLimiter
	// hit), sent as limitsFixedLib's is, with time.time() first.
	limitsMovingLib = &libScript{
		source:    "limits 2.8.0 MovingWindowRateLimiter, RedisStorage (redis-py 4.3.4)",
		body:      scriptBody(limitsAcquireMovingFile),
		keyPrefix: "LIMITER/",
		keySuffix: limitsKeySuffix,
		eval:      "EVAL", evalsha: "EVALSHA",
		onNoScript: reloadThenEvalsha,
		clock:      true,
		args:       limitsMovingArgs,
		decide:     limitsMovingDecide,
	}
)

func init() {
	for _, l := range []*libScript{redisRateLib, redisRateAtMostLib, rlflexLib, rateLimitRedisLib,
		ululeLib, fastifyLib, limitsFixedLib, limitsMovingLib} {
		l.sha = sha1Hex(l.body)
		if l.scriptLoad == ([2]string{}) {
			l.scriptLoad = scriptLoadUpper
		}
		if l.reload == nil {
			l.reload = []string{l.body}
		}
	}
}

// libDefaults fills a limit for a library mode. As redis_rate's PerSecond,
// PerMinute and PerHour do, the burst defaults to the rate.
func libDefaults(l Limit) Limit {
	if l.Count == 0 {
		l.Count = 100
	}
	if l.Burst == 0 {
		l.Burst = l.Count
	}
	return l.withDefaults()
}

// redisRateArgs: AllowN(ctx, key, Limit{Rate, Burst, Period}, n) sends
// burst, rate, period in seconds (a float64, which go-redis formats with
// strconv 'f' -1) and n. Allow(ctx, key, PerSecond(r)) is rate r, burst r,
// period "1", n 1.
func redisRateArgs(l Limit) ([]string, error) {
	if l.Count > math.MaxInt32 || l.Burst > math.MaxInt32 {
		return nil, fmt.Errorf("redis-rate: limit %d, burst %d: redis_rate's Limit holds ints", l.Count, l.Burst)
	}
	return []string{itoa(l.Burst), itoa(l.Count), ftoa(l.Period), itoa(l.Cost)}, nil
}

// rlflexArgs: consume(key, points) sends String(points),
// String(floor(duration)), String(this.points), String(this.duration).
// Below one second the library runs MULTI INCRBY PTTL instead of the
// script, so such a period is refused here.
func rlflexArgs(l Limit) ([]string, error) {
	sec := math.Floor(l.Period)
	if sec < 1 || sec > 1<<53 {
		return nil, fmt.Errorf("rlflex: period %v s: rate-limiter-flexible runs its script only for durations of 1 s or more (shorter ones use MULTI INCRBY PTTL)", l.Period)
	}
	return []string{itoa(l.Cost), ftoa(sec), itoa(l.Count), ftoa(l.Period)}, nil
}

// rateLimitRedisArgs: increment(key) sends windowMs.toString(). The store
// counts one hit per request, so a cost other than 1 cannot be sent.
func rateLimitRedisArgs(l Limit) ([]string, error) {
	ms := l.Period * 1000
	if ms != math.Trunc(ms) || ms < 1 || ms > 1<<53 {
		return nil, fmt.Errorf("rate-limit-redis: period %v s: express-rate-limit's windowMs is a whole number of milliseconds", l.Period)
	}
	if l.Cost != 1 {
		return nil, fmt.Errorf("rate-limit-redis: cost %d: the store counts exactly one hit per request", l.Cost)
	}
	return []string{ftoa(ms)}, nil
}

// wholeMs is a period as a whole number of milliseconds, or false.
func wholeMs(period float64) (int64, bool) {
	ms := period * 1000
	if ms != math.Trunc(ms) || ms < 1 || ms > 1<<53 {
		return 0, false
	}
	return int64(ms), true
}

// ululeArgs: Increment(ctx, key, count, rate) sends count and
// rate.Period.Milliseconds(), both int64 (limiter.Get sends count 1). A
// period that is not a whole number of milliseconds would be truncated,
// and one under a millisecond sent as 0, which the script takes as no
// expiry; both are refused.
func ululeArgs(l Limit) ([]string, error) {
	ms, ok := wholeMs(l.Period)
	if !ok || l.Period > float64(math.MaxInt64/int64(time.Second)) {
		return nil, fmt.Errorf("ulule: period %v s: the store sends rate.Period.Milliseconds(), so the period must be a whole number of milliseconds (at least 1) that a time.Duration holds", l.Period)
	}
	return []string{itoa(l.Cost), itoa(ms)}, nil
}

// fastifyArgs: incr(key, cb, timeWindow, max) sends timeWindow (ms, which
// the plugin truncates to an integer), max, and continueExceeding and
// exponentialBackoff, both false by default, which ioredis writes as
// String(false). Each request is one INCR: a cost other than 1 cannot be
// sent.
func fastifyArgs(l Limit) ([]string, error) {
	ms, ok := wholeMs(l.Period)
	if !ok {
		return nil, fmt.Errorf("fastify: period %v s: @fastify/rate-limit's timeWindow is a whole number of milliseconds (at least 1)", l.Period)
	}
	if l.Cost != 1 {
		return nil, fmt.Errorf("fastify: cost %d: the store counts exactly one hit per request (INCR)", l.Cost)
	}
	if l.Count > 1<<53 {
		return nil, fmt.Errorf("fastify: limit %d: @fastify/rate-limit's max is a JavaScript number (at most 2^53)", l.Count)
	}
	return []string{itoa(ms), itoa(l.Count), "false", "false"}, nil
}

// limitsGranularities are limits' RateLimitItem classes, largest first,
// with their GRANULARITY seconds (a month is 30 days, a year 12 months).
var limitsGranularities = []struct {
	name    string
	seconds int64
}{
	{"year", 12 * 30 * 86400}, {"month", 30 * 86400}, {"day", 86400},
	{"hour", 3600}, {"minute", 60}, {"second", 1},
}

// limitsItem is the RateLimitItem a limit is written as: the largest
// granularity whose length divides the period, and the multiple of it
// ("10 per hour" for 3600 s, "5 per 90 second" for 90 s). Its get_expiry()
// is the period in whole seconds.
func limitsItem(l Limit) (multiples int64, granularity string, err error) {
	if l.Period != math.Trunc(l.Period) || l.Period < 1 || l.Period > 1<<53 {
		return 0, "", fmt.Errorf("limits: period %v s: a RateLimitItem's window is a whole number of seconds (multiples of a granularity of at least a second)", l.Period)
	}
	sec := int64(l.Period)
	for _, g := range limitsGranularities {
		if sec%g.seconds == 0 {
			return sec / g.seconds, g.name, nil
		}
	}
	panic("unreachable: every period is a multiple of a second")
}

// limitsKeySuffix: key_for(identifier) is
// "LIMITER/identifier/amount/multiples/granularity"; this is the part
// after the identifier.
func limitsKeySuffix(l Limit) string {
	multiples, granularity, err := limitsItem(l)
	if err != nil {
		panic("bench: limits key suffix for a limit args refused: " + err.Error())
	}
	return "/" + itoa(l.Count) + "/" + itoa(multiples) + "/" + granularity
}

// limitsFixedArgs: FixedWindowRateLimiter.hit(item, key, cost=amount)
// sends incr's [expiry, amount]: item.get_expiry() and the cost, Python
// ints, which redis-py writes with repr.
func limitsFixedArgs(l Limit) ([]string, error) {
	if _, _, err := limitsItem(l); err != nil {
		return nil, err
	}
	return []string{itoa(int64(l.Period)), itoa(l.Cost)}, nil
}

// limitsMovingArgs: MovingWindowRateLimiter.hit(item, key, cost=amount)
// sends acquire_entry's [time.time(), limit, expiry, amount]; these are the
// last three (the clock is written per batch, see libScript.clock).
func limitsMovingArgs(l Limit) ([]string, error) {
	if _, _, err := limitsItem(l); err != nil {
		return nil, err
	}
	return []string{itoa(l.Count), itoa(int64(l.Period)), itoa(l.Cost)}, nil
}

// appendPyTime appends t as Python's time.time() is and as redis-py writes
// it: the Unix time in nanoseconds converted to a double and divided by
// 1e9 (CPython's _PyTime_AsSecondsDouble), formatted by repr, the shortest
// text that reads back as the same double, with ".0" when it is whole.
// For today's clock it is 10 digits, a point, and up to 7 more.
func appendPyTime(dst []byte, t time.Time) []byte {
	ns := t.UnixNano()
	var f float64
	if ns%1e9 == 0 {
		f = float64(ns / 1e9)
	} else {
		f = float64(ns) / 1e9
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst
}

// libCheckEvery: one reply in this many (and each connection's first) has
// its whole shape checked; every reply is counted by its decision field.
const libCheckEvery = 32

// elems reads the n elements of array resp into dst, or reports that resp
// is not an array of n.
func elems(resp redcon.RESP, n int, dst []redcon.RESP) ([]redcon.RESP, bool) {
	if resp.Type != redcon.Array || resp.Count != n {
		return nil, false
	}
	dst = dst[:0]
	data := resp.Data
	for range n {
		k, e := redcon.ReadNextRESP(data)
		if k == 0 {
			return nil, false
		}
		dst = append(dst, e)
		data = data[k:]
	}
	return dst, true
}

func respInt(e redcon.RESP) (int64, bool) {
	if e.Type != redcon.Integer {
		return 0, false
	}
	v, err := strconv.ParseInt(string(e.Data), 10, 64)
	return v, err == nil
}

func badShape(mode, why string, resp redcon.RESP) (outcome, string) {
	return outError, mode + " reply " + why + ": " + describeBad(resp)
}

// redisRateDecide: {allowed, remaining, retry_after, reset_after}, the
// first two integers (Redis truncates the script's numbers), the last two
// the script's tostring() of a float. Allowed is the units admitted: cost,
// or 0 when refused (what redis_rate's callers test).
func redisRateDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	if resp.Type == redcon.Error {
		return outError, string(resp.Data)
	}
	var buf [4]redcon.RESP
	e, ok := elems(resp, 4, buf[:])
	if !ok {
		return badShape("redis-rate", "is not an array of 4", resp)
	}
	allowed, ok := respInt(e[0])
	if !ok || (allowed != 0 && allowed != lim.Cost) {
		return badShape("redis-rate", "allowed is not 0 or the cost", resp)
	}
	if check {
		remaining, ok := respInt(e[1])
		if !ok || remaining < 0 || remaining > lim.Burst {
			return badShape("redis-rate", "remaining is not an integer in [0, burst]", resp)
		}
		if e[2].Type != redcon.Bulk || e[3].Type != redcon.Bulk {
			return badShape("redis-rate", "retry_after and reset_after are not strings", resp)
		}
		retry, err1 := strconv.ParseFloat(string(e[2].Data), 64)
		reset, err2 := strconv.ParseFloat(string(e[3].Data), 64)
		if err1 != nil || err2 != nil || !(reset >= 0) || math.IsNaN(retry) {
			return badShape("redis-rate", "retry_after or reset_after is not a number (reset_after >= 0)", resp)
		}
		if allowed > 0 && string(e[2].Data) != "-1" {
			return badShape("redis-rate", `admitted but retry_after is not "-1"`, resp)
		}
		if allowed == 0 && lim.Cost > 0 && (remaining != 0 || !(retry > 0)) {
			return badShape("redis-rate", "refused with remaining > 0 or retry_after <= 0", resp)
		}
	}
	if allowed > 0 {
		return outAllowed, ""
	}
	return outLimited, ""
}

// redisRateAtMostDecide: AllowAtMost's reply is allowN's, except that
// allowed is what was granted, between 1 and the cost, when admitted.
func redisRateAtMostDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	if resp.Type == redcon.Error {
		return outError, string(resp.Data)
	}
	var buf [4]redcon.RESP
	e, ok := elems(resp, 4, buf[:])
	if !ok {
		return badShape("redis-rate-atmost", "is not an array of 4", resp)
	}
	allowed, ok := respInt(e[0])
	if !ok || allowed < 0 || allowed > max(lim.Cost, 1) {
		return badShape("redis-rate-atmost", "allowed is not in [0, cost]", resp)
	}
	if check && (e[2].Type != redcon.Bulk || e[3].Type != redcon.Bulk) {
		return badShape("redis-rate-atmost", "retry_after and reset_after are not strings", resp)
	}
	if allowed > 0 {
		return outAllowed, ""
	}
	return outLimited, ""
}

// rlflexDecide: {consumed, ttl_ms}; rate-limiter-flexible rejects when
// consumed exceeds points.
func rlflexDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	return counterDecide("rlflex", resp, lim.Count, lim.Cost, int64(math.Floor(lim.Period))*1000, check)
}

// rateLimitRedisDecide: {totalHits, timeToExpire_ms}; express-rate-limit
// refuses when totalHits exceeds the limit.
func rateLimitRedisDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	return counterDecide("rate-limit-redis", resp, lim.Count, 1, int64(lim.Period*1000), check)
}

// ululeDecide: {count, ttl_ms}; the limiter's context is Reached when the
// count exceeds the rate's limit.
func ululeDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	return counterDecide("ulule", resp, lim.Count, lim.Cost, int64(lim.Period*1000), check)
}

// fastifyDecide: {current, ttl_ms}; the plugin refuses when current
// exceeds max.
func fastifyDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	return counterDecide("fastify", resp, lim.Count, 1, int64(lim.Period*1000), check)
}

// limitsFixedDecide: the window's count after the hit, an integer;
// FixedWindowRateLimiter.hit allows when it is at most the limit.
func limitsFixedDecide(resp redcon.RESP, lim Limit, check bool) (outcome, string) {
	if resp.Type == redcon.Error {
		return outError, string(resp.Data)
	}
	count, ok := respInt(resp)
	if !ok {
		return badShape("limits-fixed", "is not an integer", resp)
	}
	if check && count < lim.Cost {
		return badShape("limits-fixed", fmt.Sprintf("count is below the cost %d", lim.Cost), resp)
	}
	if count > lim.Count {
		return outLimited, ""
	}
	return outAllowed, ""
}

// limitsMovingDecide: the script returns true (the integer 1) when it
// recorded the hit and false (a nil bulk string) when the window is full;
// acquire_entry returns bool(reply). The reply is small enough to check
// whole every time.
func limitsMovingDecide(resp redcon.RESP, _ Limit, _ bool) (outcome, string) {
	switch {
	case resp.Type == redcon.Error:
		return outError, string(resp.Data)
	case resp.Type == redcon.Integer && string(resp.Data) == "1":
		return outAllowed, ""
	case resp.Type == redcon.Bulk && string(resp.Raw) == "$-1\r\n":
		return outLimited, ""
	}
	return badShape("limits-moving", "is neither 1 (true) nor a nil bulk string (false)", resp)
}

// counterDecide reads the {count, ttl_ms} reply of a fixed-window counter.
// The count is at least one request's cost, the TTL in [0, window].
func counterDecide(mode string, resp redcon.RESP, limit, cost, windowMs int64, check bool) (outcome, string) {
	if resp.Type == redcon.Error {
		return outError, string(resp.Data)
	}
	var buf [2]redcon.RESP
	e, ok := elems(resp, 2, buf[:])
	if !ok {
		return badShape(mode, "is not an array of 2", resp)
	}
	count, ok := respInt(e[0])
	if !ok {
		return badShape(mode, "count is not an integer", resp)
	}
	if check {
		ttl, ok := respInt(e[1])
		if count < cost || !ok || ttl < 0 || ttl > windowMs {
			return badShape(mode, fmt.Sprintf("is not {count >= %d, ttl in [0, %d]}", cost, windowMs), resp)
		}
	}
	if count > limit {
		return outLimited, ""
	}
	return outAllowed, ""
}

// isNoScript reports a NOSCRIPT error reply.
func isNoScript(resp redcon.RESP) bool {
	return resp.Type == redcon.Error && bytes.HasPrefix(resp.Data, []byte("NOSCRIPT"))
}

// libConn is one connection's state for a library mode.
type libConn struct {
	lib     *libScript
	lim     Limit
	call    request // evalsha sha 1 key args...
	evalReq request // eval body 1 key args...
	// load is the SCRIPT LOADs of lib.reload, encoded; loadShas their SHA1s.
	load     []byte
	loadShas []string
	// For a clock library: the arguments after the clock, encoded, and the
	// clock's text for this batch.
	fixedTail, stamp []byte
	// sent says the connection has sent the script (evalFirst libraries).
	sent bool
	// The batch's keys, flattened, and where each ends.
	keys []byte
	ends []int
	// pending holds the batch positions answered NOSCRIPT.
	pending []int
	seen    int64
	// fallbacks counts NOSCRIPT replies answered with the library's
	// fallback.
	fallbacks int64
}

func newLibConn(l *libScript, lim Limit) (*libConn, error) {
	args, err := l.args(lim)
	if err != nil {
		return nil, err
	}
	c := &libConn{lib: l, lim: lim}
	if l.clock {
		// A placeholder for the clock; setClock writes each batch's.
		c.fixedTail = newRequest(nil, false, args).tail
		args = append([]string{"0.0"}, args...)
	}
	c.call = newRequest([]string{l.evalsha, l.sha, "1"}, true, args)
	c.evalReq = newRequest([]string{l.eval, l.body, "1"}, true, args)
	for _, body := range l.reload {
		c.load = append(c.load, newRequest([]string{l.scriptLoad[0], l.scriptLoad[1], body}, false, nil).head...)
		c.loadShas = append(c.loadShas, sha1Hex(body))
	}
	return c, nil
}

// setClock writes the clock argument of the calls for a batch written at
// now. It allocates only while the buffers grow to their final size.
func (c *libConn) setClock(now time.Time) {
	c.stamp = appendPyTime(c.stamp[:0], now)
	c.call.tail = append(redcon.AppendBulk(c.call.tail[:0], c.stamp), c.fixedTail...)
	c.evalReq.tail = append(redcon.AppendBulk(c.evalReq.tail[:0], c.stamp), c.fixedTail...)
}

// appendCall appends the library's call for key: EVALSHA, or EVAL where
// the library would send the script itself.
func (c *libConn) appendCall(dst, key []byte) []byte {
	if c.lib.evalFirst && !c.sent {
		c.sent = true
		return c.evalReq.appendTo(dst, key)
	}
	return c.call.appendTo(dst, key)
}

// appendRetry appends what the library sends after a NOSCRIPT for key, and
// returns how many replies that asks for.
func (c *libConn) appendRetry(dst, key []byte) ([]byte, int) {
	switch {
	case c.lib.onNoScript == reloadThenEvalsha:
		dst = append(dst, c.load...)
		return c.call.appendTo(dst, key), len(c.loadShas) + 1
	case c.lib.evalFirst:
		return c.appendCall(dst, key), 1
	}
	return c.evalReq.appendTo(dst, key), 1
}

func (c *libConn) noScript() {
	c.fallbacks++
	c.sent = false
}

func (c *libConn) key(i int) []byte {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.keys[start:c.ends[i]]
}

// decide counts one call's reply.
func (c *libConn) decide(resp redcon.RESP) (outcome, string) {
	check := c.seen%libCheckEvery == 0
	c.seen++
	return c.lib.decide(resp, c.lim, check)
}

// libBatch writes n library calls in one write and reads their replies.
// Calls answered NOSCRIPT are sent again, after the batch, the way the
// library does it; such a request counts by its second reply, and its
// latency runs to that reply.
func (w *worker) libBatch(st *runState, n int, now, sent time.Time) error {
	c := w.lib
	w.wbuf = w.wbuf[:0]
	c.keys, c.ends = c.keys[:0], c.ends[:0]
	if c.lib.clock {
		c.setClock(now)
	}
	for range n {
		k := w.nextKey()
		c.keys = append(c.keys, k...)
		c.ends = append(c.ends, len(c.keys))
		w.wbuf = c.appendCall(w.wbuf, k)
	}
	if err := w.refreshDeadline(st, now); err != nil {
		return err
	}
	if st.interval == 0 {
		sent = time.Now()
	}
	if _, err := w.conn.Write(w.wbuf); err != nil {
		w.unanswered += int64(n)
		return fmt.Errorf("write: %w", err)
	}
	arrived := sent
	c.pending = c.pending[:0]
	for got := 0; got < n; {
		resp, ok, err := w.rd.next()
		if err != nil {
			w.unanswered += int64(n - got + len(c.pending))
			return err
		}
		if !ok {
			if err := w.rd.fill(w.conn); err != nil {
				w.unanswered += int64(n - got + len(c.pending))
				return fmt.Errorf("read: %w", err)
			}
			arrived = time.Now()
			continue
		}
		if isNoScript(resp) {
			c.noScript()
			c.pending = append(c.pending, got)
		} else {
			w.countLib(resp)
			w.record(arrived.Sub(sent))
		}
		got++
	}
	if len(c.pending) > 0 {
		if err := w.libRetry(sent); err != nil {
			return err
		}
	}
	w.progress.Add(int64(n))
	if w.rd.buffered() > 0 {
		return fmt.Errorf("%w: %d bytes arrived beyond the replies expected", errProtocol, w.rd.buffered())
	}
	return nil
}

// libRetry sends the library's fallback for every pending call and counts
// their replies. A fallback that fails again is an error, as it is for the
// libraries, which retry once.
func (w *worker) libRetry(sent time.Time) error {
	c := w.lib
	w.wbuf = w.wbuf[:0]
	per := 1
	for _, i := range c.pending {
		w.wbuf, per = c.appendRetry(w.wbuf, c.key(i))
	}
	left := len(c.pending)
	if _, err := w.conn.Write(w.wbuf); err != nil {
		w.unanswered += int64(left)
		return fmt.Errorf("write: %w", err)
	}
	arrived := time.Now()
	// With SCRIPT LOADs first, a request's load replies come before its
	// call's; a failed load fails the request.
	part, loadBad := 0, ""
	for left > 0 {
		resp, ok, err := w.rd.next()
		if err != nil {
			w.unanswered += int64(left)
			return err
		}
		if !ok {
			if err := w.rd.fill(w.conn); err != nil {
				w.unanswered += int64(left)
				return fmt.Errorf("read: %w", err)
			}
			arrived = time.Now()
			continue
		}
		if part++; part < per {
			// The first failed load is the one reported.
			switch {
			case loadBad != "":
			case resp.Type == redcon.Error:
				loadBad = "SCRIPT LOAD after NOSCRIPT: " + string(resp.Data)
			case string(resp.Data) != c.loadShas[part-1]:
				loadBad = "SCRIPT LOAD after NOSCRIPT answered " + describeBad(resp)
			}
			continue
		}
		if loadBad != "" {
			w.errors++
			if w.firstErr == "" {
				w.firstErr = loadBad
			}
		} else {
			w.countLib(resp)
		}
		w.record(arrived.Sub(sent))
		part, loadBad = 0, ""
		left--
	}
	return nil
}

// countLib counts one library call's reply.
func (w *worker) countLib(resp redcon.RESP) {
	out, why := w.lib.decide(resp)
	switch out {
	case outAllowed:
		w.allowed++
	case outLimited:
		w.limited++
	default:
		w.errors++
		if w.firstErr == "" {
			w.firstErr = why
		}
	}
}
