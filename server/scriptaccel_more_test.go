package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestAcceleratedEdgeCases runs the accelerated scripts on values the
// seeded driver meets seldom, three ways as it does (natively, on the
// interpreter with the same frozen clock, on redis-server), and requires
// the native path to have answered where it should: counters past 2^53
// (a Lua number rounds them), the reply's truncation of a number, the
// coercions tonumber makes.
func TestAcceleratedEdgeCases(t *testing.T) {
	native, nc := startAccel(t, true)
	interp, ic := startAccel(t, false)
	rd := sluicetest.StartRedis(t)
	rc := sluicetest.DialRaw(t, rd.Network, rd.Addr)
	sluicetest.SetClock(t, interp.Client, sluicetest.FreezeClock(t, native.Client))
	byStat := map[string]difftest.AccelScript{}
	for _, s := range accelScripts {
		byStat[s.Stat] = s
	}
	const big = "9007199254740994" // 2^53 + 2: one more is no double
	cases := []struct {
		stat   string
		setup  []string // a command on the key (its name left out), or nil
		args   []string
		native bool // the native code answers (else it gives up)
		// onlySluice: Redis answers otherwise, a difference of Sluice's
		// engine the native code must keep (the interpreter's answer).
		onlySluice bool
	}{
		{"rlflex_incrttl", []string{"SET", big}, []string{"1", "60"}, true, false},
		{"rate_limit_redis_increment", []string{"SET", big, "PX", "100000"}, []string{"60000"}, true, false},
		{"ulule_incr", []string{"SET", big, "PX", "100000"}, []string{"1", "60000"}, true, false},
		{"ulule_incr", nil, []string{"9223372036854775807", "60000"}, true, false}, // 2^63 answers LLONG_MIN
		{"ulule_incr", nil, []string{"9007199254740993", "1000"}, true, false},     // equal as doubles
		{"ulule_incr", nil, []string{"1", "-1.5"}, true, false},                    // ttl truncated, no PEXPIRE
		{"ulule_incr", nil, []string{"0", "1000"}, true, false},
		{"ulule_incr", []string{"SET", "5"}, []string{"1", "x"}, false, false},      // nil ttl, unused here
		{"ulule_incr", nil, []string{"1", "x"}, false, false},                       // nil ttl compared: an error
		{"ulule_incr", nil, []string{"1", "1e3"}, false, false},                     // PEXPIRE refuses "1e3"
		{"ulule_incr", []string{"SET", "0.5"}, []string{"1", "1000"}, false, false}, // INCRBY refuses
		{"ulule_peek", []string{"SET", "9007199254740993"}, nil, true, false},
		{"ulule_peek", []string{"SET", "-1.5"}, nil, true, false},
		{"ulule_peek", []string{"SET", "1e3", "PX", "100000"}, nil, true, false},
		{"ulule_peek", []string{"SET", " 5"}, nil, false, false},
		{"ulule_peek", []string{"SET", "abc"}, nil, false, false}, // tonumber's nil ends the array
		{"ulule_peek", nil, nil, true, false},
		{"throttled_cas", nil, []string{"1", "2", "60"}, true, false},
		{"throttled_cas", []string{"SET", "10"}, []string{"10", "12", "90"}, true, false},
		{"throttled_cas", []string{"SET", "10"}, []string{"11", "12", "90"}, true, false},
		{"throttled_cas", []string{"SET", "10"}, []string{"10"}, false, false},
		{"throttled_cas", []string{"SET", "10"}, []string{"10", "12", "0"}, false, false},
		{"throttled_cas", []string{"SET", "10"}, nil, true, false},
		{"fastify_incr", []string{"SET", big, "PX", "100000"}, []string{"60000", "3", "false", "false"}, true, false},
		{"fastify_incr", []string{"SET", "5", "PX", "100000"}, []string{"1000", "3", "false", "true"}, true, false},
		{"fastify_incr", []string{"SET", "20", "PX", "100000"}, []string{"1000", "3", "false", "true"}, true, false},
		{"fastify_incr", []string{"SET", "5", "PX", "100000"}, []string{"1000", "3", "true", "true"}, true, false},
		{"fastify_incr", nil, []string{"1e3", "3", "false", "false"}, true, false},
		{"fastify_incr", nil, []string{"0", "3", "false", "false"}, true, false},
		{"fastify_incr", nil, []string{"-0", "3", "false", "false"}, false, false},
		{"fastify_incr", []string{"SET", "5", "PX", "100000"}, []string{"1000", "3.5", "false", "true"}, false, false},
		// The backoff past what Sluice's PEXPIRE takes: Redis sets it.
		{"fastify_incr", []string{"SET", "1000"}, []string{"1000", "1", "false", "true"}, false, true},
		{"fastify_read", []string{"SET", "9007199254740993", "PX", "100000"}, nil, true, false},
		{"fastify_read", []string{"SET", "7"}, nil, true, false},
		{"fastify_read", nil, nil, true, false},
		{"rate_limit_redis_get", nil, nil, true, false},
		{"rate_limit_redis_get", []string{"SET", "abc", "PX", "100000"}, nil, true, false},
	}
	runs := func(stat string) string {
		info := nc.Do(t, "INFO", "scripting")
		_, rest, _ := strings.Cut(info, "script_native_"+stat+":")
		line, _, _ := strings.Cut(rest, ",")
		return line // runs=N
	}
	for i, c := range cases {
		s, ok := byStat[c.stat]
		if !ok {
			t.Fatalf("no accelerated script %s", c.stat)
		}
		key := "edge:" + strconv.Itoa(i)
		conns := []*sluicetest.RawConn{nc, ic}
		if !c.onlySluice {
			conns = append(conns, rc)
		}
		for _, conn := range conns {
			if c.setup != nil {
				conn.Do(t, append([]string{c.setup[0], key}, c.setup[1:]...)...)
			}
		}
		before := runs(c.stat)
		cmd := append([]string{"EVAL", difftest.AccelBody(t, s), "1", key}, c.args...)
		got, want := nc.Do(t, cmd...), ic.Do(t, cmd...)
		name := fmt.Sprintf("%s %q on %q", c.stat, c.args, c.setup)
		if got != want {
			t.Errorf("%s: native %q, interpreter %q", name, got, want)
		}
		if after := runs(c.stat); (after != before) != c.native {
			t.Errorf("%s: native %v wanted, counts went from %s to %s", name, c.native, before, after)
		}
		state := func(conn *sluicetest.RawConn) string { return conn.Do(t, "GET", key) + conn.Do(t, "PTTL", key) }
		ns := state(nc)
		if is := state(ic); ns != is {
			t.Errorf("%s: state native %q, interpreter %q", name, ns, is)
		}
		if c.onlySluice {
			continue
		}
		if rr := rc.Do(t, cmd...); !sameUpToTTL(got, rr, s.TTLLine) {
			t.Errorf("%s: sluice %q, redis %q", name, got, rr)
		}
		if rs := state(rc); !sameUpToTTL(ns, rs, strings.Count(ns, "\r\n")-1) {
			t.Errorf("%s: state sluice %q, redis %q", name, ns, rs)
		}
	}
}
