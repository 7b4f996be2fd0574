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
	Name string // a short name; its keys in the drivers are Name:0 and Name:1
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
			return []string{"10", PickR(r, "x", "0", "-1", " 5", "0x10", ""), "1", PickR(r, "1", "x", " 2")}
		}
		period := PickR(r, "1", "60", "0.5", "3600", "0.001")
		if long {
			period = PickR(r, "60", "3600")
		}
		// Costs beyond what is left take what is left.
		return []string{strconv.Itoa(1 + r.IntN(20)), strconv.Itoa(1 + r.IntN(20)), period, PickR(r, strconv.Itoa(r.IntN(30)), "2.5", "-1")}
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
