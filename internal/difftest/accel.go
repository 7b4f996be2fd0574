package difftest

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The limiter scripts Sluice runs natively (server/scriptaccel.go), as the
// seeded drivers that compare them send them: the native path with the
// interpreter and redis-server (server/scriptaccel_test.go), and the
// native path replicated and replayed (cmd/sluice-server).

// AccelScript is one accelerated library script.
type AccelScript struct {
	// Name is a short name; its keys in the drivers are Name:0 and
	// Name:1. A library's scripts over the same keys (a counter and its
	// read) share one.
	Name string
	File string // under bench/scripts, with the header sluice-bench strips
	Stat string // its INFO line's name (script_native_<Stat>)
	Time bool   // reads TIME
	// TTLLine is the line of its RESP reply that is a TTL in
	// milliseconds, or -1: compared with Redis's within a margin, since
	// Redis's clock runs.
	TTLLine int
	// Keys names the script whose keys this one works on, when not its
	// own (a library's scripts over the same data: one writes what
	// another reads); "" is its own, Name:0 and Name:1.
	Keys string
	// Args draws arguments, now and then malformed ones (which the native
	// code must hand to the interpreter). long keeps every expiry far
	// beyond the run (for the comparison with Redis, whose clock runs);
	// now is the servers' clock in milliseconds, for scripts that are
	// given the client's time.
	Args func(r *rand.Rand, long bool, now int64) []string
}

// AccelScripts are the accelerated scripts.
var AccelScripts = []AccelScript{
	{"redis_rate", "redis_rate_allown.lua", "redis_rate_allown", true, -1, "", func(r *rand.Rand, long bool, _ int64) []string {
		if r.IntN(12) == 0 {
			return []string{PickR(r, "x", "0", "-1", " 5", "1e3", "0x10"), "10", "1", "1"}
		}
		if long {
			return []string{strconv.Itoa(1 + r.IntN(20)), strconv.Itoa(1 + r.IntN(20)), PickR(r, "60", "3600"), strconv.Itoa(1 + r.IntN(5))}
		}
		return []string{strconv.Itoa(1 + r.IntN(20)), strconv.Itoa(1 + r.IntN(20)), PickR(r, "1", "60", "0.5", "3600"), strconv.Itoa(r.IntN(6))}
	}},
	{"rlflex", "rlflex_incr_ttl.lua", "rlflex_incrttl", false, 2, "", func(r *rand.Rand, long bool, _ int64) []string {
		if r.IntN(12) == 0 {
			return []string{PickR(r, "x", "1.5", "-2", "01"), PickR(r, "0", "abc", "50", "-1")}
		}
		if long {
			return []string{strconv.Itoa(1 + r.IntN(5)), strconv.Itoa(30 + r.IntN(10))}
		}
		return []string{strconv.Itoa(1 + r.IntN(5)), strconv.Itoa(1 + r.IntN(10))}
	}},
	{"rate_limit_redis", "rate_limit_redis_increment.lua", "rate_limit_redis_increment", false, 2, "", func(r *rand.Rand, long bool, _ int64) []string {
		if r.IntN(12) == 0 {
			return []string{PickR(r, "0", "x", "1.5", "-5", "")}
		}
		if long {
			return []string{strconv.Itoa(1000 * (30 + r.IntN(5)))}
		}
		return []string{strconv.Itoa(1000 * (1 + r.IntN(5)))}
	}},
	{"redis_rate_atmost", "redis_rate_allowatmost.lua", "redis_rate_allowatmost", true, -1, "", func(r *rand.Rand, long bool, _ int64) []string {
		if r.IntN(12) == 0 {
			rate := PickR(r, "x", "0", "-1", " 5", "0x10", "")
			if long && rate == "-1" {
				// A negative rate grows the TAT without bound: past the
				// expiry range Sluice takes (docs/datatypes.md), where
				// Redis's SET still succeeds.
				rate = "0"
			}
			return []string{"10", rate, "1", PickR(r, "1", "x", " 2")}
		}
		period := PickR(r, "1", "60", "0.5", "3600", "0.001")
		if long {
			period = PickR(r, "60", "3600")
		}
		// Costs beyond what is left take what is left.
		return []string{strconv.Itoa(1 + r.IntN(20)), strconv.Itoa(1 + r.IntN(20)), period, PickR(r, strconv.Itoa(r.IntN(30)), "2.5", "-1")}
	}},
	// ulule/limiter's incr: the count (Get sends 1, Increment more) and
	// the period in milliseconds.
	{"ulule", "ulule_incr.lua", "ulule_incr", false, 2, "", func(r *rand.Rand, long bool, _ int64) []string {
		switch r.IntN(20) {
		case 0: // counts INCRBY refuses, or that round as doubles
			return []string{PickR(r, "x", "1.5", "01", " 1", "", "1e2", "0x10", "9223372036854775807", "-9223372036854775808", "9007199254740993"), "60000"}
		case 1: // periods tonumber reads otherwise, or PEXPIRE refuses
			return []string{PickR(r, "1", "0"), PickR(r, "0", "-1", "-1.5", "1.5", "1e3", "0x10", " 5", "5 ", "abc", "", "007", "-0", "1e300", "99999999999999999999", "5000000000000")}
		case 2:
			return []string{PickR(r, "1", "0", "-1", "3")} // no period: tonumber(nil) is an error
		}
		count := PickR(r, "1", "1", "1", "1", "1", "2", "3", "0", "-1", strconv.Itoa(1+r.IntN(10)))
		if long {
			return []string{count, PickR(r, "3600000", "600000", "86400000", strconv.Itoa(300000+r.IntN(1000000)))}
		}
		return []string{count, PickR(r, "1000", "1500", "2000", "500", "60000", strconv.Itoa(1+r.IntN(5000)))}
	}},
	// ulule/limiter's peek (no arguments), on incr's keys.
	{"ulule_peek", "ulule_peek.lua", "ulule_peek", false, 2, "ulule", func(r *rand.Rand, _ bool, _ int64) []string {
		if r.IntN(10) == 0 {
			return []string{"ignored"}
		}
		return nil
	}},
	// throttled's compare-and-swap: the old value, the new one and the TTL
	// in seconds. Its library makes its keys outside scripts (SETNX), so
	// it runs on ulule's, whose small counters are values it can swap
	// (and whose scripts then meet the values it writes, and counters
	// again where it replaces the setups' strings). The values are small
	// integers and the setups' strings, so that the old one often matches.
	{"throttled_cas", "throttled_cas.lua", "throttled_cas", false, -1, "ulule", func(r *rand.Rand, long bool, _ int64) []string {
		value := func() string {
			if r.IntN(2) == 0 {
				return strconv.Itoa(1 + r.IntN(12))
			}
			return PickR(r, "1", "2", "3", "7", "0", "0.5", "", "notanumber", "1700000000000000000")
		}
		switch r.IntN(14) {
		case 0: // TTLs SETEX refuses
			return []string{value(), value(), PickR(r, "0", "-1", "1.5", "x", "", "01", " 5", "1e3", "9223372036854775807")}
		case 1: // missing arguments
			return [][]string{nil, {value()}, {value(), value()}}[r.IntN(3)]
		}
		if long {
			return []string{value(), value(), PickR(r, "3600", "86400", strconv.Itoa(600+r.IntN(10000)))}
		}
		return []string{value(), value(), strconv.Itoa(1 + r.IntN(10))}
	}},
	// @fastify/rate-limit's incr: the window in milliseconds, max,
	// continueExceeding and exponentialBackoff. Against Redis (long), the
	// backoff does not run: its window doubles with every refused hit, on
	// counters that grow all run long (the shared keys' too), and soon
	// passes what Sluice's PEXPIRE takes (about 6.9e12 ms; Redis's takes
	// its 2^53 - 1), where the interpreter fails and Redis does not. The
	// backoff, there too, is compared between the native code and the
	// interpreter; the limiter test runs it against Redis.
	{"fastify", "fastify_incr.lua", "fastify_incr", false, 2, "", func(r *rand.Rand, long bool, _ int64) []string {
		max := strconv.Itoa(1 + r.IntN(5))
		cont, backoff := PickR(r, "true", "false", "false"), PickR(r, "true", "false")
		if long && cont != "true" {
			backoff = "false"
		}
		w := "60000"
		if long {
			w = "3600000"
		}
		switch r.IntN(12) {
		case 0: // windows that are no integer PEXPIRE takes, that tonumber
			// reads otherwise, or that delete the key (all long against Redis)
			if long {
				return []string{PickR(r, "1.5", "-0", "0", "-1000", "3.6e6", "0x400000", " 3600000", "x", "", "1e20", "1e12", "5e12", "3600000.0"), max, cont, backoff}
			}
			return []string{PickR(r, "1.5", "-0", "0", "-1000", "1e3", "0x10", " 5", "x", "", "1e20", "1e12", "5e12", "60000.0"), max, cont, backoff}
		case 1: // maxes that are no integer, or no number
			return []string{w, PickR(r, "2.5", "x", "-1", "1e300", "-1e300", "0", " 3", "0x2"), cont, backoff}
		case 2: // flags that are not "true", missing arguments
			return [][]string{{w, max, PickR(r, "TRUE", "1", "yes", "")}, {w, max}, {w}, nil,
				{w, max, "false", PickR(r, "TRUE", "1")}}[r.IntN(5)]
		}
		if long {
			return []string{PickR(r, "3600000", "600000", strconv.Itoa(300000+r.IntN(1000000))), max, cont, backoff}
		}
		return []string{PickR(r, "1000", "2000", "500", "60000", strconv.Itoa(1+r.IntN(5000))), max, cont, backoff}
	}},
	// @fastify/rate-limit's read (no arguments), on incr's keys.
	{"fastify_read", "fastify_read.lua", "fastify_read", false, 2, "fastify", func(r *rand.Rand, _ bool, _ int64) []string {
		if r.IntN(10) == 0 {
			return []string{"1000", "3"} // as a caller passing incr's arguments
		}
		return nil
	}},
	// rate-limit-redis's get (no arguments), on increment's keys. Its TTL
	// follows a bulk value (line 3); a missing key's is -2, the same on both.
	{"rate_limit_redis_get", "rate_limit_redis_get.lua", "rate_limit_redis_get", false, 3, "rate_limit_redis", func(r *rand.Rand, _ bool, _ int64) []string {
		return nil
	}},
	// The Python limits library's three scripts (accel_limits.go): its
	// moving window's count reads the lists its hit writes.
	{"limits_fixed", "limits_incr_expire.lua", "limits_incr_expire", false, -1, "", limitsFixedArgs},
	{"limits_acquire", "limits_acquire_moving_window.lua", "limits_acquire_moving_window", false, -1, "", limitsAcquireArgs},
	{"limits_moving", "limits_moving_window.lua", "limits_moving_window", false, -1, "limits_acquire", limitsMovingArgs},
}

// KeyPrefix is what s's keys start with (before ":0" and ":1").
func (s AccelScript) KeyPrefix() string {
	if s.Keys != "" {
		return s.Keys
	}
	return s.Name
}

// PickR is one of xs, drawn from r.
func PickR(r *rand.Rand, xs ...string) string { return xs[r.IntN(len(xs))] }

// AccelBody is s's text as the library sends it: sluice-bench's copy
// (bench/scripts) less its header. The limiter tests (internal/limiters)
// show that the installed libraries send these very texts.
func AccelBody(tb testing.TB, s AccelScript) string {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "bench", "scripts", s.File))
	if err != nil {
		tb.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "-- sluice-bench: end of header\n")
	if !ok {
		tb.Fatalf("%s: no header marker", s.File)
	}
	return body
}
