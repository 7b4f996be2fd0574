package difftest

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// Arguments for the Python limits library's scripts, as its Redis storage
// (limits/storage/redis.py) sends them through redis-py: integers as
// decimal strings, the client's time.time() as repr writes a float.

// limitsTimestamp is a client's time.time() near now (ms), now and then
// seconds behind (a client whose clock lags, an old window), written as
// Python's repr writes a float: the shortest text that reads back the
// same double, with ".0" on whole numbers.
func limitsTimestamp(r *rand.Rand, now int64) string {
	f := float64(now)/1000 + r.Float64()*0.001
	switch r.IntN(8) {
	case 0:
		f -= float64(1 + r.IntN(30))
	case 1:
		f = float64(now / 1000) // a whole second: "1764600000.0"
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// limitsExpiry is a window's length in seconds: long ones outlive the run.
func limitsExpiry(r *rand.Rand, long bool) string {
	if long {
		return strconv.Itoa(PickI(r, 60, 600, 3600))
	}
	return strconv.Itoa(1 + r.IntN(10))
}

// limitsLimit is a limit: mostly small, now and then 0, negative (LRANGE
// and LTRIM read those from the end) or large.
func limitsLimit(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		return PickR(r, "0", "-1", "-3", "100", "1000")
	}
	return strconv.Itoa(1 + r.IntN(10))
}

// limitsFixedArgs: incr_expire.lua's {expiry, amount} (RedisStorage.incr).
func limitsFixedArgs(r *rand.Rand, long bool, _ int64) []string {
	expiry, amount := limitsExpiry(r, long), strconv.Itoa(1+r.IntN(5))
	switch r.IntN(14) {
	case 0:
		// What Lua's tonumber reads otherwise than a plain decimal, what
		// INCRBY refuses as %.17g, values past 2^53 (a double's rounding
		// of INCRBY's integer), and valid oddities (0, 2.0, 1e0).
		amount = PickR(r, "x", "", " 1", "1 ", "0x2", "1.5", "-0", "inf", "nan", "1e400", "0", "-2", "2.0", "1e0",
			"9223372036854775807", "99999999999999999999", "9007199254740993", "4503599627370496")
	case 1:
		// EXPIRE refuses these, deletes the key for 0 and negatives, and
		// takes 2e9 s (past what the native code takes on). Not between
		// about 7e9 s and 9.2e15 s: Redis takes those, Sluice's EXPIRE
		// (its clock's range) does not.
		expiry = PickR(r, "x", "", " 5", "5 ", "1.5", "0x10", "+5", "-0", "0", "-1", "2000000000", "9223372036854775807")
	case 2:
		return []string{expiry}[:r.IntN(2)] // ARGV[2], or both, missing
	}
	return []string{expiry, amount}
}

// limitsMovingArgs: moving_window.lua's {int(time.time() - expiry), limit}
// (get_moving_window).
func limitsMovingArgs(r *rand.Rand, _ bool, now int64) []string {
	start := strconv.FormatInt(now/1000-int64(1+r.IntN(20)), 10)
	limit := limitsLimit(r)
	switch r.IntN(14) {
	case 0:
		// A start Lua reads otherwise or not at all (compared with a
		// number: an error, unless the list is empty), and plain
		// decimals a client would not send.
		start = PickR(r, "x", "", " 5", "0x10", "inf", "nan", "1e400", "-0", "0", "-5", "1.5", "1e3",
			strconv.FormatInt(now/1000+5, 10), strconv.FormatFloat(float64(now)/1000-3.5, 'f', -1, 64))
	case 1:
		// LRANGE refuses these as %.17g.
		limit = PickR(r, "x", "", " 3", "0x3", "1.5", "-0", "1e20", "inf", "3.0", "1e1")
	case 2:
		return []string{start}[:r.IntN(2)]
	}
	return []string{start, limit}
}

// limitsAcquireArgs: acquire_moving_window.lua's {time.time(), limit,
// expiry, amount} (acquire_entry).
func limitsAcquireArgs(r *rand.Rand, long bool, now int64) []string {
	ts, limit, expiry := limitsTimestamp(r, now), limitsLimit(r), limitsExpiry(r, long)
	amount := strconv.Itoa(1 + r.IntN(3))
	if r.IntN(10) == 0 {
		amount = strconv.Itoa(4 + r.IntN(30))
	}
	switch r.IntN(16) {
	case 0:
		ts = PickR(r, "x", "", " 1764600000.5", "0x10", "inf", "nan", "1e400", "-0", "0", "-1.5", "1e300", "5e-324", "1764600000")
	case 1:
		// Not integers as %.17g (LINDEX, LTRIM), or too large.
		limit = PickR(r, "x", "", " 3", "1.5", "-0", "1e16", "1e20", "3.0", "0x3")
	case 2:
		// Not integers as %.17g (EXPIRE, after the writes), 0 and
		// negatives (which delete the list), 2e9 (past what the native
		// code takes on), too large for either server.
		expiry = PickR(r, "x", "", " 5", "1.5", "-0", "0", "-5", "2e9", "1e19", "60.0", "0x10")
	case 3:
		// None pushed (LPUSH's arity error), fractions, and now and then
		// (rarely: thousands of values cost every server time) unpack's
		// limit, 7999 values.
		amount = PickR(r, "0", "-1", "1.5", "x", "", "0x2", "2.0", "1e1")
		if r.IntN(25) == 0 {
			amount = PickR(r, "7998", "7999", "8000", "8001")
		}
	case 4:
		return []string{ts, limit, expiry}[:r.IntN(4)]
	case 5, 6:
		// A long window: the list passes the length Sluice indexes at
		// (128), is trimmed from its tail at the limit, and LINDEX reads
		// deep into it.
		limit, amount = strconv.Itoa(150+r.IntN(250)), strconv.Itoa(40+r.IntN(110))
	}
	return []string{ts, limit, expiry, amount}
}

// PickI is one of xs, drawn from r.
func PickI(r *rand.Rand, xs ...int) int { return xs[r.IntN(len(xs))] }
