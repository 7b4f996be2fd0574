package server_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// The accelerated scripts, three ways: natively, on the interpreter (a
// second Sluice with script-acceleration off) and on redis-server. A seeded
// driver sends each script with varied arguments (malformed ones too, which
// the native code hands to the interpreter), over keys that exist, have
// expired, or hold other types; replies and the whole resulting state must
// agree. Between the two Sluices the clock is frozen and stepped alike, so
// everything must match byte for byte, TTLs included. Redis's clock cannot
// be stepped: against it the driver does not step the clock, TIME is given
// to Redis's copy of a script that reads it (the same text, with the call
// replaced by the frozen time), and TTLs match within a margin.

var accelScripts = difftest.AccelScripts

func shaOf(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

var pick = difftest.PickR

// accelShared are keys every script and the setups use (so that scripts
// meet each other's values and other types); accelKeys adds each script's
// own two (none for a script on another's keys).
var accelShared = []string{"shared", "other"}

var accelKeys = func() []string {
	var keys []string
	for _, s := range accelScripts {
		if s.Keys == "" {
			keys = append(keys, s.Name+":0", s.Name+":1")
		}
	}
	return append(keys, accelShared...)
}()

func accelKey(r *rand.Rand, script string) string {
	if r.IntN(8) == 0 {
		return accelShared[r.IntN(len(accelShared))]
	}
	return script + ":" + strconv.Itoa(r.IntN(2))
}

// accelState is every pool key's type, value (read by its type's command)
// and PTTL.
func accelState(t *testing.T, c *sluicetest.RawConn) []string {
	var out []string
	for _, k := range accelKeys {
		typ := c.Do(t, "TYPE", k)
		var val string
		switch strings.TrimSpace(strings.TrimPrefix(typ, "+")) {
		case "hash":
			val = c.Do(t, "HGETALL", k)
		case "list":
			val = c.Do(t, "LRANGE", k, "0", "-1")
		case "zset":
			val = c.Do(t, "ZRANGE", k, "0", "-1", "WITHSCORES")
		case "set":
			val = c.Do(t, "SORT", k, "ALPHA")
		default:
			val = c.Do(t, "GET", k)
		}
		out = append(out, k+" "+typ+" "+val+" "+c.Do(t, "PTTL", k))
	}
	return out
}

func startAccel(t *testing.T, on bool) (*sluicetest.Server, *sluicetest.RawConn) {
	scripts := server.NewScripts(nil)
	scripts.SetAcceleration(on)
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{Scripts: scripts}, Engine: engine.Config{Scripts: scripts}})
	return ts, sluicetest.DialRaw(t, "tcp", ts.Addr)
}

func TestAcceleratedScriptsMatchInterpreterAndRedis(t *testing.T) {
	steps, seed, _ := difftest.Settings(28000)
	native, nc := startAccel(t, true)
	interp, ic := startAccel(t, false)
	rd := sluicetest.StartRedis(t)
	rc := sluicetest.DialRaw(t, rd.Network, rd.Addr)
	start := sluicetest.FreezeClock(t, native.Client)
	sluicetest.SetClock(t, interp.Client, start)
	now := start
	r := rand.New(rand.NewPCG(seed, 17))
	bodies := make([]string, len(accelScripts))
	redisBodies := make([]string, len(accelScripts))
	for i, s := range accelScripts {
		bodies[i] = difftest.AccelBody(t, s)
		redisBodies[i] = strings.Replace(bodies[i], `redis.call("TIME")`, `{ARGV[#ARGV - 1], ARGV[#ARGV]}`, 1)
		if s.Time && redisBodies[i] == bodies[i] {
			t.Fatalf("%s: no TIME call to replace", s.Name)
		}
	}
	// With Redis in the comparison, the Sluices' clock follows Redis's,
	// which runs, by a step every 100 commands (so that TTLs stay within
	// the comparison's margin of Redis's however long the run takes);
	// then the two Sluices alone go on with clock steps and expiries.
	withRedis := steps / 2
	counts := map[string]int{}
	realStart := time.Now()
	for step := range steps {
		if step < withRedis && step%100 == 99 {
			if real := start + time.Since(realStart).Milliseconds(); real > now {
				now = real
				sluicetest.SetClock(t, native.Client, now)
				sluicetest.SetClock(t, interp.Client, now)
			}
		}
		both := func(args ...string) (string, string) {
			got, want := nc.Do(t, args...), ic.Do(t, args...)
			if got != want {
				t.Fatalf("step %d %.80q: native %q, interpreter %q", step, args, got, want)
			}
			return got, want
		}
		key := accelKeys[r.IntN(len(accelKeys))]
		switch r.IntN(60) {
		case 0:
			setup := [][]string{{"DEL", key}, {"DEL", key}, {"SET", key, pick(r, "notanumber", "0.5", "7", "", "9007199254740993")},
				{"HSET", key, "f", "v"}, {"RPUSH", key, pick(r, "5", "x", "1e3"), "0"}}[r.IntN(5)]
			both(setup...)
			if step < withRedis {
				rc.Do(t, setup...)
			}
			continue
		case 1, 2:
			if step >= withRedis {
				ms := int64(r.IntN(3000))
				now += ms
				sluicetest.SetClock(t, native.Client, now)
				sluicetest.SetClock(t, interp.Client, now)
				continue
			}
		}
		si := r.IntN(len(accelScripts))
		s := accelScripts[si]
		key = accelKey(r, s.KeyPrefix())
		counts[s.Stat]++
		args := s.Args(r, step < withRedis, now)
		cmd := append([]string{"EVAL", bodies[si], "1", key}, args...)
		got, _ := both(cmd...)
		if step >= withRedis {
			continue
		}
		rargs := append([]string{"EVAL", redisBodies[si], "1", key}, args...)
		if s.Time {
			rargs = append(rargs, strconv.FormatInt(now/1000, 10), strconv.FormatInt(now%1000*1000, 10))
		}
		// Redis ran a copy with TIME given: its errors name that copy.
		want := strings.ReplaceAll(rc.Do(t, rargs...), shaOf(redisBodies[si]), shaOf(bodies[si]))
		if !sameUpToTTL(got, want, s.TTLLine) {
			t.Fatalf("step %d %s %q on %s: sluice %q, redis %q", step, s.Name, args, key, got, want)
		}
	}
	// The scripts' commands counted the same: a native script that gives
	// up, and is run again by the interpreter, counts its calls once.
	for _, section := range []string{"commandstats", "errorstats"} {
		// Less DEBUG: the clock was frozen through the native server.
		notDebug := func(l string) bool { return strings.HasPrefix(l, "cmdstat_debug:") }
		n, i := statLines(t, nc.Do(t, "INFO", section)), statLines(t, ic.Do(t, "INFO", section))
		if n, i = slices.DeleteFunc(n, notDebug), slices.DeleteFunc(i, notDebug); !slices.Equal(n, i) {
			t.Fatalf("INFO %s:\n native      %q\n interpreter %q", section, n, i)
		}
	}
	ns, is := accelState(t, nc), accelState(t, ic)
	if fmt.Sprint(ns) != fmt.Sprint(is) {
		t.Fatalf("state: native %q\n interpreter %q", ns, is)
	}
	info := nc.Do(t, "INFO", "scripting")
	for _, s := range accelScripts {
		if !strings.Contains(info, "script_native_"+s.Stat+":runs=") || strings.Contains(info, "script_native_"+s.Stat+":runs=0,") {
			t.Fatalf("%s never ran natively: %q", s.Name, info)
		}
	}
	if strings.Contains(ic.Do(t, "INFO", "scripting"), "script_runs_native:") && !strings.Contains(ic.Do(t, "INFO", "scripting"), "script_runs_native:0\r") {
		t.Fatal("the interpreter's server ran scripts natively")
	}
	t.Logf("%d steps (%d with redis-server), seed %d: %v; native server %s", steps, withRedis, seed, counts, strings.ReplaceAll(info, "\r\n", " "))
}

// TestAcceleratedStateMatchesRedis: after a run without clock steps, the
// stored values on Sluice (native) and Redis are byte for byte the same and
// TTLs agree within a margin.
func TestAcceleratedStateMatchesRedis(t *testing.T) {
	_, nc := startAccel(t, true)
	rd := sluicetest.StartRedis(t)
	rc := sluicetest.DialRaw(t, rd.Network, rd.Addr)
	r := rand.New(rand.NewPCG(5, 5))
	for range 300 {
		s := accelScripts[r.IntN(len(accelScripts))]
		if s.Time {
			continue // on Redis's own clock
		}
		key := accelKey(r, s.KeyPrefix())
		args := s.Args(r, true, time.Now().UnixMilli())
		cmd := append([]string{"EVAL", difftest.AccelBody(t, s), "1", key}, args...)
		got, want := nc.Do(t, cmd...), rc.Do(t, cmd...)
		if !sameUpToTTL(got, want, s.TTLLine) {
			t.Fatalf("%s %q: sluice %q, redis %q", s.Name, args, got, want)
		}
	}
	for i, k := range accelKeys {
		g, w := accelState(t, nc)[i], accelState(t, rc)[i]
		if !sameUpToTTL(g, w, strings.Count(g, "\r\n")-1) { // the PTTL ends the line
			t.Errorf("%s: sluice %q, redis %q", k, g, w)
		}
	}
}

// sameUpToTTL compares two replies exactly, except that a reply's line
// ttlLine (-1: none) is a TTL in milliseconds, which may be up to 3 s
// smaller on Redis (its clock runs while Sluice's stands still) and up to
// 1 s larger (a key set while Sluice's clock stood still, read after it
// caught up with Redis's, or a Sluice whose clock runs too).
func sameUpToTTL(got, want string, ttlLine int) bool {
	if got == want {
		return true
	}
	a, b := strings.Split(got, "\r\n"), strings.Split(want, "\r\n")
	if len(a) != len(b) || ttlLine < 0 || ttlLine >= len(a) {
		return false
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		x, err1 := strconv.Atoi(strings.TrimLeft(a[i], ": "))
		y, err2 := strconv.Atoi(strings.TrimLeft(b[i], ": "))
		if i != ttlLine || err1 != nil || err2 != nil || x < y-1000 || x-y > 3000 || y < 0 {
			return false
		}
	}
	return true
}
