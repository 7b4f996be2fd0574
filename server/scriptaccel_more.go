package server

import (
	"bytes"
	"math"

	"github.com/sluicehq/sluice/engine"
)

// More accelerated scripts (registered in knownScripts): ulule/limiter's
// two, throttled's compare-and-swap, @fastify/rate-limit's two and
// rate-limit-redis's get. Their texts are in bench/scripts. Each function
// checks, before its first write, everything that could make the script
// raise an error or take a path it does not follow; a write that fails
// first (a key of another type, a read-only run) has changed nothing, so
// it may still give up then.

var (
	accelGiveUp    = engine.Reply{}
	throttledNoKey = engine.Reply{Kind: engine.ReplyError, Err: engine.RawError("key does not exist")}
)

// accelGetString is a GET reply's value: ok is false for a missing key
// (Lua's false); give is true for anything but a string or nothing (an
// error such as WRONGTYPE, which redis.call raises).
func accelGetString(rep engine.Reply) (v []byte, ok, give bool) {
	switch rep.Kind {
	case engine.ReplyNil:
		return nil, false, false
	case engine.ReplyBulk:
		if rep.Bulk != nil {
			return rep.Bulk, true, false
		}
		return []byte(rep.Str), true, false
	}
	return nil, false, true
}

// accelMaxExpireMS bounds the millisecond TTLs (either sign) the native code
// passes to PEXPIRE: inside what Sluice's PEXPIRE accepts (|ms| up to
// clock.Max/1e6, about 6.9e12 ms; Redis takes more, to LLONG_MAX - now,
// and so Sluice's interpreter fails there where Redis does not), and
// exact as a Lua number.
const accelMaxExpireMS = 1e12

// ululeIncr is ulule/limiter's luaIncrScript:
//
//	count = tonumber(ARGV[1]); ttl = tonumber(ARGV[2])
//	ret = INCRBY key ARGV[1]
//	if ret == count then (if ttl > 0 then PEXPIRE key ARGV[2]); return {ret, ttl}
//	return {ret, PTTL key}
//
// Lua matters where:
//   - INCRBY parses ARGV[1] itself (strictly) and raises an error on
//     anything but an integer, on a value that is not one, on another
//     type and on overflow: all before it writes, so giving up then is
//     still in time.
//   - ret == count compares two Lua numbers: INCRBY's integer and
//     tonumber(ARGV[1]) (strtod of a canonical integer, so the double
//     nearest it, as float64(n)); they differ above 2^53 only as the
//     doubles do.
//   - ttl is compared with 0 when ret == count: a ttl that tonumber makes
//     nil ("x") is a Lua error there, after INCRBY; so ARGV[2] must be a
//     plain decimal up front, and when it is positive, an integer PEXPIRE
//     accepts (PEXPIRE reads the string ARGV[2], not the number: "1.5"
//     or "1e3" fail there, after INCRBY).
//   - The reply's numbers are Lua numbers: ret through a double (rounded
//     above 2^53), ttl truncated toward zero ("-1.5" answers -1).
func ululeIncr(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 2 {
		return accelGiveUp, false // KEYS[1] or an ARGV nil: Lua errors
	}
	n, err := engine.ParseInt64(r.Args[0])
	if err != nil {
		return accelGiveUp, false
	}
	ttl, ok := luaDecimal(r.Args[1])
	if !ok {
		return accelGiveUp, false
	}
	if ttl > 0 {
		if ms, err := engine.ParseInt64(r.Args[1]); err != nil || ms > accelMaxExpireMS {
			return accelGiveUp, false
		}
	}
	key := r.Keys[0]
	ret := sr.call(cINCRBY, key, r.Args[0])
	if ret.Kind != engine.ReplyInt {
		return accelGiveUp, false // the error came before any write
	}
	cur := float64(ret.Int)
	if cur == float64(n) {
		if ttl > 0 {
			sr.call(cPEXPIRE, key, r.Args[1]) // cannot fail: checked above, and the key is there
		}
		return sr.array(numItem(cur), numItem(ttl)), true
	}
	pttl := sr.call(cPTTL, key)
	if pttl.Kind != engine.ReplyInt {
		return accelGiveUp, false // PTTL cannot fail; never reached
	}
	return sr.array(numItem(cur), numItem(float64(pttl.Int))), true
}

// ululePeek is ulule/limiter's luaPeekScript: {0, 0} for a missing key,
// else {tonumber(GET key), PTTL key}. Only reads: it gives up on a value
// that is not a plain decimal (Lua would coerce hex or spaced numbers, and
// a nil from tonumber would end the array: an empty reply), and on
// another type (GET's error).
func ululePeek(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 {
		return accelGiveUp, false
	}
	key := r.Keys[0]
	v, ok, give := accelGetString(sr.call(cGET, key))
	if give {
		return accelGiveUp, false
	}
	if !ok {
		return sr.array(intItem(0), intItem(0)), true
	}
	f, ok := luaDecimal(v)
	if !ok {
		return accelGiveUp, false
	}
	pttl := sr.call(cPTTL, key)
	if pttl.Kind != engine.ReplyInt {
		return accelGiveUp, false
	}
	return sr.array(numItem(f), numItem(float64(pttl.Int))), true
}

// throttledCAS is throttled's redisCASScript (goredisstore): GET; a
// missing key returns redis.error_reply("key does not exist"), whose
// line has no leading "-" and so is "-key does not exist" ("key" taken
// as the code, as Redis answers; nothing is appended, since the script
// returns the error rather than raising it); v ~= ARGV[1] (a string
// comparison, bytes; a missing ARGV[1] is nil, never equal) returns 0;
// else SETEX key ARGV[3] ARGV[2] and 1. SETEX parses ARGV[3] itself: it
// must be a positive integer (else an error, and the script's); SETEX is
// the only write, so when it fails anyway nothing has changed.
func throttledCAS(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 {
		return accelGiveUp, false
	}
	key := r.Keys[0]
	v, ok, give := accelGetString(sr.call(cGET, key))
	if give {
		return accelGiveUp, false
	}
	if !ok {
		return throttledNoKey, true
	}
	if len(r.Args) < 1 || !bytes.Equal(v, r.Args[0]) {
		return intItem(0), true
	}
	if len(r.Args) < 3 {
		return accelGiveUp, false // ARGV[3] nil: redis.call raises
	}
	if secs, err := engine.ParseInt64(r.Args[2]); err != nil || secs <= 0 || secs > 1e9 {
		return accelGiveUp, false
	}
	if rep := sr.call(cSETEX, key, r.Args[2], r.Args[1]); rep.Kind == engine.ReplyError {
		return accelGiveUp, false
	}
	return intItem(1), true
}

// fastifyMaxSafeInteger is the script's MAX_SAFE_INTEGER, (2^53) - 1.
const fastifyMaxSafeInteger = 1<<53 - 1

// fastifyIncr is @fastify/rate-limit's RedisStore lua:
//
//	timeWindow = tonumber(ARGV[1]); max = tonumber(ARGV[2])
//	continueExceeding = ARGV[3] == 'true'; exponentialBackoff = ARGV[4] == 'true'
//	current = INCR key
//	if current == 1 or (continueExceeding and current > max) then PEXPIRE key timeWindow
//	elseif exponentialBackoff and current > max then
//	  timeWindow = math.min(timeWindow * 2^(current - max - 1), 2^53 - 1); PEXPIRE key timeWindow
//	else timeWindow = PTTL key end
//	return {current, timeWindow}
//
// Lua matters where:
//   - timeWindow and max are Lua numbers: nil (not numeric) fails a
//     comparison or PEXPIRE after INCR, so both must be plain decimals up
//     front (even where the path taken would not need them).
//   - PEXPIRE gets timeWindow as a Lua number, which redis.call writes
//     with %.17g (integers without a point); PEXPIRE then wants an
//     integer: 1.5, -0 (written "-0") or 1e20 (written "1e+20") fail
//     after INCR. So the written argument must parse as PEXPIRE parses
//     it, up front. Zero or negative is accepted (PEXPIRE deletes the key).
//   - The backoff: current - max - 1 is a double; with an integral max
//     it is an integer >= 0, 2^k is exact (or inf), and with a
//     timeWindow >= 1 the product is an integer or >= 2^53, so math.min
//     gives an integer (fastifyBackoffWindow). Anything else (a
//     fractional max, a timeWindow below 1, where 0 * inf is NaN) gives
//     up, when the backoff can run (exponentialBackoff and not
//     continueExceeding); so does a window that grows past what Sluice's
//     PEXPIRE takes (accelMaxExpireMS; Redis's goes to 2^53 - 1 ms),
//     foreseen from the counter read before INCR.
//   - The reply: current through a double; timeWindow truncated.
//   - INCR fails (another type, a value that is not an integer, overflow,
//     a read-only run) before it writes: still in time to give up.
func fastifyIncr(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 2 {
		return accelGiveUp, false // tonumber(nil) is an error
	}
	window, ok1 := luaDecimal(r.Args[0])
	max, ok2 := luaDecimal(r.Args[1])
	if !ok1 || !ok2 || window < -accelMaxExpireMS || window > accelMaxExpireMS {
		return accelGiveUp, false
	}
	windowArg := sr.arg(window)
	if _, err := engine.ParseInt64(windowArg); err != nil {
		return accelGiveUp, false
	}
	continueExceeding := len(r.Args) > 2 && string(r.Args[2]) == "true"
	backoff := len(r.Args) > 3 && string(r.Args[3]) == "true"
	key := r.Keys[0]
	if backoff && !continueExceeding {
		if window < 1 || max != math.Trunc(max) {
			return accelGiveUp, false
		}
		// The backoff's window grows with current, past what PEXPIRE
		// takes: read the counter first to know what INCR will answer (it
		// parses the value as ParseInt64 does), and give up while nothing
		// is written.
		v, ok, give := accelGetString(sr.peek(cGET, key))
		if give {
			return accelGiveUp, false
		}
		next := int64(1)
		if ok {
			n, err := engine.ParseInt64(v)
			if err != nil || n == math.MaxInt64 {
				return accelGiveUp, false // INCR fails
			}
			next = n + 1
		}
		if c := float64(next); c != 1 && c > max && fastifyBackoffWindow(window, max, c) > accelMaxExpireMS {
			return accelGiveUp, false
		}
	}
	incr := sr.call(cINCR, key)
	if incr.Kind != engine.ReplyInt {
		return accelGiveUp, false // the error came before any write
	}
	current := float64(incr.Int)
	out := window
	switch {
	case current == 1 || (continueExceeding && current > max):
		sr.call(cPEXPIRE, key, windowArg) // cannot fail: checked above, and the key is there
	case backoff && current > max:
		// Within accelMaxExpireMS: current is the one foreseen above.
		out = fastifyBackoffWindow(window, max, current)
		sr.call(cPEXPIRE, key, sr.arg(out))
	default:
		pttl := sr.call(cPTTL, key)
		if pttl.Kind != engine.ReplyInt {
			return accelGiveUp, false // PTTL cannot fail; never reached
		}
		out = float64(pttl.Int)
	}
	return sr.array(numItem(current), numItem(out)), true
}

// fastifyBackoffWindow is the script's math.min(timeWindow * (2 ^
// (current - max - 1)), MAX_SAFE_INTEGER) for a window >= 1 and an
// integral max below current: Lua evaluates (current - max) - 1, each
// rounded, an integer >= 0; 2^k is exact, and so is window * 2^k below
// 2^53 (window < 2^40); above, or at inf, math.min answers
// MAX_SAFE_INTEGER (it keeps its first argument unless the second is
// smaller).
func fastifyBackoffWindow(window, max, current float64) float64 {
	exp := current - max - 1
	if exp >= 53 {
		return fastifyMaxSafeInteger
	}
	if v := window * math.Ldexp(1, int(exp)); v < fastifyMaxSafeInteger {
		return v
	}
	return fastifyMaxSafeInteger
}

// fastifyRead is @fastify/rate-limit's luaRead: {0, 0} for a missing key
// (GET's false), else {tonumber(GET key), PTTL key, or 0 when negative}.
// Only reads: it gives up on a value that is not a plain decimal (a nil
// from tonumber would end the array) and on another type.
func fastifyRead(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 {
		return accelGiveUp, false
	}
	key := r.Keys[0]
	v, ok, give := accelGetString(sr.call(cGET, key))
	if give {
		return accelGiveUp, false
	}
	if !ok {
		return sr.array(intItem(0), intItem(0)), true
	}
	f, ok := luaDecimal(v)
	if !ok {
		return accelGiveUp, false
	}
	pttl := sr.call(cPTTL, key)
	if pttl.Kind != engine.ReplyInt {
		return accelGiveUp, false
	}
	ttl := pttl.Int
	if ttl < 0 {
		ttl = 0
	}
	return sr.array(numItem(f), intItem(ttl)), true
}

// rateLimitRedisGet is rate-limit-redis's get: {GET key, PTTL key}. The
// value stays a string (a bulk reply); a missing key's false is not nil,
// so the array keeps its two items: a nil bulk, then -2. Another type
// is GET's error: the interpreter raises it.
func rateLimitRedisGet(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 {
		return accelGiveUp, false
	}
	key := r.Keys[0]
	v, ok, give := accelGetString(sr.call(cGET, key))
	if give {
		return accelGiveUp, false
	}
	hits := engine.Reply{Kind: engine.ReplyNil}
	if ok {
		// A copy, as the Lua string is: the reply outlives the script.
		hits = engine.Reply{Kind: engine.ReplyBulk, Str: string(v)}
	}
	pttl := sr.call(cPTTL, key)
	if pttl.Kind != engine.ReplyInt {
		return accelGiveUp, false
	}
	return sr.array(hits, numItem(float64(pttl.Int))), true
}
