package server_test

import (
	"bufio"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// scriptStatScripts are the scripts TestScriptStatsMatchRedis draws from:
// commands that succeed and fail, raised and caught, passed on or not;
// calls refused before they run (unknown, arity, not allowed in scripts, a
// write from EVAL_RO); the script's own errors; error replies nested in
// an array.
var scriptStatScripts = []struct {
	body string
	ro   bool
}{
	{body: "return redis.call('incr', KEYS[1])"},
	{body: "return redis.pcall('incr', KEYS[1])"},
	{body: "local r = redis.pcall('incr', KEYS[1]) return 1"},
	{body: "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])"},
	{body: "return redis.call('hset', KEYS[1], 'f', ARGV[1])"},
	{body: "return redis.call('get')"},
	{body: "return redis.pcall('get')"},
	{body: "return redis.call('nosuchcommand', KEYS[1])"},
	{body: "return redis.pcall('multi')"},
	{body: "error('boom')"},
	{body: "return redis.error_reply('MY own error')"},
	{body: "return {err = 'X table error'}"},
	{body: "local t = redis.pcall('incr', KEYS[1]) t['ignore_error_stats_update'] = nil return t"},
	{body: "return {1, redis.pcall('incr', KEYS[1]), redis.pcall('get', KEYS[1])}"},
	{body: "return redis.call('expire', KEYS[1], 'soon')"},
	{body: "return redis.call('ping')"},
	{body: "return redis.call('set', KEYS[1], 'ro')", ro: true},
	{body: "return redis.pcall('get', KEYS[1])", ro: true},
	// Keys it did not declare: Sluice stops it and runs it again with
	// every shard held; its first calls must not count twice.
	{body: "redis.call('incr', KEYS[1] .. ':a') redis.call('incr', KEYS[1] .. ':b') return redis.call('incr', 'other:' .. KEYS[1])"},
}

var monitorAddr = regexp.MustCompile(`^\+\d+\.\d{6} \[0 ([^\]]+)\] `)

// TestScriptStatsMatchRedis sends a seeded random sequence of EVAL and
// EVAL_RO to Sluice and to redis-server 7, over keys holding integers,
// text and hashes, with the slow log taking everything and a monitor
// attached, and compares what each says about the scripts' own commands:
// INFO commandstats (calls, rejected_calls, failed_calls; durations
// masked), errorstats and total_error_replies, the slow log (client
// "?:0" for a script's command) and the monitor's lines ("lua" for a
// script's command; times and other clients' addresses masked).
func TestScriptStatsMatchRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	redis := sluicetest.StartRedis(t, "--databases", "1")
	w := newTwin(t, ts, redis)
	w.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
	w.same("CONFIG", "SET", "slowlog-max-len", "100000")

	monitor := func(network, addr string) *bufio.Reader {
		mon := sluicetest.DialRaw(t, network, addr)
		if got := mon.Do(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatalf("MONITOR: %q", got)
		}
		mon.Conn().SetReadDeadline(time.Now().Add(30 * time.Second))
		return bufio.NewReader(mon.Conn())
	}
	monS, monR := monitor("tcp", ts.Addr), monitor(redis.Network, redis.Addr)
	w.same("SLOWLOG", "RESET")
	w.same("CONFIG", "RESETSTAT")

	rng := rand.New(rand.NewSource(11))
	steps := 400
	for step := range steps {
		key := "k" + strconv.Itoa(rng.Intn(4))
		switch rng.Intn(8) {
		case 0:
			w.sameAt(step, "SET", key, strconv.Itoa(rng.Intn(100)))
		case 1:
			w.sameAt(step, "SET", key, "text")
		case 2:
			w.sameAt(step, "HSET", key, "f", "v")
		}
		sc := scriptStatScripts[rng.Intn(len(scriptStatScripts))]
		eval := "EVAL"
		if sc.ro {
			eval = "EVAL_RO"
		}
		w.sameAt(step, eval, sc.body, "1", key, strconv.Itoa(rng.Intn(10)))
	}
	// More calls than a run defers (maxPendingCalls).
	w.same("EVAL", "for i = 1, 5000 do redis.call('incr', KEYS[1]) end return 1", "1", "loop")
	w.same("ECHO", "end")

	var stats string
	for _, section := range []string{"commandstats", "errorstats"} {
		got, want := w.both("INFO", section)
		if g, r := statLines(t, got), statLines(t, want); !slices.Equal(g, r) {
			t.Fatalf("INFO %s:\n sluice %q\n redis  %q", section, g, r)
		}
		if section == "commandstats" {
			stats = strings.Join(statLines(t, got), "\n")
		}
	}
	totalErrors := func(info string) string {
		for _, l := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(l, "total_error_replies:") {
				return l
			}
		}
		return "(none)"
	}
	if got, want := w.both("INFO", "stats"); totalErrors(got) != totalErrors(want) {
		t.Fatalf("sluice %s, redis %s", totalErrors(got), totalErrors(want))
	}
	// Something to compare: the scripts' commands were counted, failed
	// and refused.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`cmdstat_incr:calls=[1-9]\d*,usec=N,usec_per_call=N,rejected_calls=0,failed_calls=[1-9]`),
		regexp.MustCompile(`cmdstat_get:calls=[1-9]\d*,usec=N,usec_per_call=N,rejected_calls=[1-9]`),
		regexp.MustCompile(`cmdstat_set:calls=[1-9]\d*,usec=N,usec_per_call=N,rejected_calls=[1-9]`),
		regexp.MustCompile(`cmdstat_multi:calls=0,usec=N,usec_per_call=N,rejected_calls=[1-9]`),
	} {
		if !want.MatchString(stats) {
			t.Fatalf("INFO commandstats lacks %s:\n%s", want, stats)
		}
	}

	// The slow log, newest first: a script's commands before their EVAL,
	// from "?:0"; other clients' addresses masked.
	slowlog := func(reply string) []string {
		var out []string
		for _, e := range parseRESP(t, reply).([]any) {
			f := e.([]any)
			addr := f[4].(string)
			if addr != "?:0" {
				addr = "client"
			}
			out = append(out, strings.Join(anyStrings(f[3].([]any)), " ")+" from "+addr+" "+f[5].(string))
		}
		return out
	}
	got, want := w.both("SLOWLOG", "GET", "-1")
	if g, r := slowlog(got), slowlog(want); !slices.Equal(g, r) {
		for i := range min(len(g), len(r)) {
			if g[i] != r[i] {
				t.Fatalf("SLOWLOG GET -1, entry %d of %d/%d:\n sluice %q\n redis  %q", i, len(g), len(r), g[max(i-2, 0):min(i+3, len(g))], r[max(i-2, 0):min(i+3, len(r))])
			}
		}
		t.Fatalf("SLOWLOG GET -1: sluice %d entries, redis %d", len(g), len(r))
	}
	if !strings.Contains(got, "?:0") {
		t.Fatalf("the slow log has no script command: %q", got)
	}

	lines := func(r *bufio.Reader) []string {
		var out []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("monitor: %v after %d lines, the last %q", err, len(out), out[max(len(out)-3, 0):])
			}
			m := monitorAddr.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("monitor line %q", line)
			}
			from := "client"
			if m[1] == "lua" {
				from = "lua"
			}
			line = from + " " + line[len(m[0]):]
			out = append(out, line)
			if line == "client \"ECHO\" \"end\"\r\n" {
				return out
			}
		}
	}
	gotLines, wantLines := lines(monS), lines(monR)
	if !slices.Equal(gotLines, wantLines) {
		for i := range min(len(gotLines), len(wantLines)) {
			if gotLines[i] != wantLines[i] {
				t.Fatalf("monitor line %d of %d/%d: sluice %q, redis %q", i, len(gotLines), len(wantLines), gotLines[i], wantLines[i])
			}
		}
		t.Fatalf("monitor: sluice %d lines, redis %d", len(gotLines), len(wantLines))
	}
	if !slices.ContainsFunc(gotLines, func(l string) bool { return strings.HasPrefix(l, "lua ") }) {
		t.Fatal("the monitor showed no script command")
	}
}

func anyStrings(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i], _ = x.(string)
	}
	return out
}
