package server_test

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// resp is a parsed RESP2 reply: string (simple, bulk; "<nil>" for a nil),
// int64, error (as "-..." string) or []any.
func parseRESP(t *testing.T, s string) any {
	t.Helper()
	v, rest := parseOne(t, s)
	if rest != "" {
		t.Fatalf("trailing bytes after a reply: %q", rest)
	}
	return v
}

func parseOne(t *testing.T, s string) (any, string) {
	t.Helper()
	line, rest, ok := strings.Cut(s, "\r\n")
	if !ok || line == "" {
		t.Fatalf("bad reply %q", s)
	}
	switch line[0] {
	case '+':
		return line[1:], rest
	case '-':
		return line, rest
	case ':':
		n, _ := strconv.ParseInt(line[1:], 10, 64)
		return n, rest
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "<nil>", rest
		}
		return rest[:n], rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(line[1:])
		items := make([]any, 0, max(n, 0))
		for range n {
			var v any
			v, rest = parseOne(t, rest)
			items = append(items, v)
		}
		return items, rest
	}
	t.Fatalf("bad reply %q", s)
	return nil, ""
}

// maskSlowlog replaces in a SLOWLOG GET reply what legitimately differs
// between two servers: each entry's id, unix time, duration and client
// address.
func maskSlowlog(t *testing.T, reply string) string {
	t.Helper()
	v := parseRESP(t, reply)
	entries, ok := v.([]any)
	if !ok {
		return fmt.Sprintf("%q", v)
	}
	for _, e := range entries {
		f := e.([]any)
		if len(f) != 6 {
			t.Fatalf("slowlog entry of %d fields: %q", len(f), reply)
		}
		for i := range 3 {
			if _, ok := f[i].(int64); !ok {
				t.Fatalf("slowlog field %d is not an integer: %q", i, reply)
			}
			f[i] = "N"
		}
		f[4] = "addr"
	}
	return fmt.Sprintf("%q", entries)
}

// maskInts replaces every integer of a reply (times, milliseconds).
func maskInts(t *testing.T, reply string) string {
	t.Helper()
	var mask func(v any) any
	mask = func(v any) any {
		switch x := v.(type) {
		case int64:
			return "N"
		case []any:
			for i := range x {
				x[i] = mask(x[i])
			}
		}
		return v
	}
	return fmt.Sprintf("%q", mask(parseRESP(t, reply)))
}

var usecField = regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+`)

// statLines are an INFO section's lines, usec masked (durations differ),
// sorted (Redis lists commandstats in its hash table's order).
func statLines(t *testing.T, reply string) []string {
	t.Helper()
	body, _ := parseRESP(t, reply).(string)
	var lines []string
	for _, l := range strings.Split(body, "\r\n") {
		if l != "" {
			lines = append(lines, usecField.ReplaceAllString(l, "usec=N,usec_per_call=N"))
		}
	}
	slices.Sort(lines)
	return lines
}

// One command sequence to Sluice and to redis-server 7: SLOWLOG (entries
// with Redis's argument cuts, GET/LEN/RESET, errors), the settings and
// their errors, INFO commandstats/errorstats (calls, rejected_calls and
// failed_calls exact; durations masked) and LATENCY's replies compared.
// Masked, and only these: slowlog ids, times, durations and client
// addresses; LATENCY's times and milliseconds; usec and usec_per_call.
func TestCommandStatsMatchRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t, "--databases", "1"))

	// The settings, their defaults and errors.
	for _, name := range []string{"slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold",
		"latency-tracking", "latency-tracking-info-percentiles"} {
		w.same("CONFIG", "GET", name)
	}
	for _, bad := range [][2]string{
		{"slowlog-log-slower-than", "abc"}, {"slowlog-log-slower-than", "-2"}, {"slowlog-log-slower-than", "1.5"},
		{"slowlog-log-slower-than", ""}, {"slowlog-max-len", "-1"}, {"slowlog-max-len", "x"},
		{"latency-monitor-threshold", "-1"}, {"latency-tracking", "maybe"},
		{"latency-tracking-info-percentiles", "50 abc"}, {"latency-tracking-info-percentiles", "101"},
		{"latency-tracking-info-percentiles", "-1"},
	} {
		w.same("CONFIG", "SET", bad[0], bad[1])
	}
	w.same("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.99 100 0")
	w.same("CONFIG", "GET", "latency-tracking-info-percentiles")
	w.same("CONFIG", "SET", "latency-tracking-info-percentiles", "")
	w.same("CONFIG", "GET", "latency-tracking-info-percentiles")
	w.same("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
	w.same("CONFIG", "SET", "latency-tracking", "NO")
	w.same("CONFIG", "GET", "latency-tracking")
	w.same("CONFIG", "SET", "latency-tracking", "yes")

	// SLOWLOG.
	w.same("SLOWLOG", "HELP")
	w.same("SLOWLOG", "GET", "abc")
	w.same("SLOWLOG", "GET", "-2")
	w.same("SLOWLOG", "GET", "1", "2")
	w.same("SLOWLOG", "LEN", "x")
	w.same("SLOWLOG", "NOPE")
	w.same("SLOWLOG")
	w.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
	w.same("SLOWLOG", "RESET")
	w.same("SLOWLOG", "LEN") // SLOWLOG RESET itself, logged after it ran
	w.same("CONFIG", "RESETSTAT")

	// The known sequence: calls, failures (run, error reply) and rejections
	// (refused before running).
	long := strings.Repeat("x", 200)
	many := []string{"DEL"}
	for i := range 40 {
		many = append(many, "k"+strconv.Itoa(i))
	}
	seq := [][]string{
		{"SET", "k", "v"}, {"GET", "k"}, {"SET", "big", long}, {"INCR", "k"}, {"HSET", "k", "f", "v"},
		{"GET"}, {"CONFIG", "GET"}, {"NOSUCH", "x"}, {"SET", "k", "v", "BAD"}, many,
		{"CLIENT", "SETNAME", "probe"}, {"GET", "k"}, {"EXPIRE", "k", "x"}, {"OBJECT", "nope", "k"},
		{"AUTH", "secret"}, {"CONFIG", "GET", "slowlog-max-len"},
		{"MULTI"}, {"GET"}, {"EXEC"}, // GET rejected; EXEC fails with EXECABORT
		{"MULTI"}, {"SET", "t", "1"}, {"INCR", "k"}, {"PING"}, {"CONFIG", "GET", "maxclients"}, {"EXEC"}, // each counted, INCR failed
		{"WATCH", "w"}, {"SET", "w", "1"}, {"MULTI"}, {"DEL", "t"}, {"EXEC"}, // the WATCH fails: DEL does not run
	}
	for _, args := range seq {
		w.same(args...)
	}
	got, want := w.both("SLOWLOG", "GET", "-1")
	if g, r := maskSlowlog(t, got), maskSlowlog(t, want); g != r {
		t.Fatalf("SLOWLOG GET -1:\n sluice %s\n redis  %s", g, r)
	}
	if !strings.Contains(got, "... (72 more bytes)") || !strings.Contains(got, "... (10 more arguments)") || !strings.Contains(got, "(redacted)") {
		t.Fatalf("SLOWLOG lacks the cut or redacted arguments: %q", got)
	}
	got, want = w.both("SLOWLOG", "GET", "2")
	if g, r := maskSlowlog(t, got), maskSlowlog(t, want); g != r {
		t.Fatalf("SLOWLOG GET 2:\n sluice %s\n redis  %s", g, r)
	}
	w.same("SLOWLOG", "LEN")
	w.same("CONFIG", "SET", "slowlog-max-len", "3")
	w.same("SLOWLOG", "LEN")
	got, want = w.both("SLOWLOG", "GET")
	if g, r := maskSlowlog(t, got), maskSlowlog(t, want); g != r {
		t.Fatalf("SLOWLOG GET:\n sluice %s\n redis  %s", g, r)
	}
	for _, section := range []string{"commandstats", "errorstats"} {
		got, want := w.both("INFO", section)
		if g, r := statLines(t, got), statLines(t, want); !slices.Equal(g, r) {
			t.Fatalf("INFO %s:\n sluice %q\n redis  %q", section, g, r)
		}
	}
	// The sequence's counts, as both servers gave them: the comparison
	// above is of something.
	stats := strings.Join(statLines(t, w.sluice.Do(t, "INFO", "commandstats")), "\n")
	for _, want := range []string{
		"cmdstat_get:calls=2,usec=N,usec_per_call=N,rejected_calls=2,failed_calls=0",
		"cmdstat_hset:calls=1,usec=N,usec_per_call=N,rejected_calls=0,failed_calls=1",
		"cmdstat_config|get:calls=2,usec=N,usec_per_call=N,rejected_calls=1,failed_calls=0",
		"cmdstat_set:calls=5,usec=N,usec_per_call=N,rejected_calls=0,failed_calls=1",
		"cmdstat_exec:calls=3,usec=N,usec_per_call=N,rejected_calls=0,failed_calls=1",
		"cmdstat_incr:calls=2,usec=N,usec_per_call=N,rejected_calls=0,failed_calls=2",
	} {
		if !strings.Contains(stats, want) {
			t.Fatalf("INFO commandstats lacks %s:\n%s", want, stats)
		}
	}
	// latencystats: the same commands have histograms (the values differ).
	latencyNames := func(reply string) []string {
		var names []string
		for _, l := range statLines(t, reply) {
			if name, _, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, "#") {
				names = append(names, name)
			}
		}
		return names
	}
	got, want = w.both("INFO", "latencystats")
	if g, r := latencyNames(got), latencyNames(want); !slices.Equal(g, r) {
		t.Fatalf("INFO latencystats:\n sluice %q\n redis  %q", g, r)
	}
	if !regexp.MustCompile(`latency_percentiles_usec_get:p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}\r\n`).MatchString(got) {
		t.Fatalf("INFO latencystats format: %q", got)
	}
	// INFO's default has errorstats but neither commandstats nor
	// latencystats; all has the three.
	for _, arg := range [][]string{{"INFO"}, {"INFO", "default"}, {"INFO", "all"}, {"INFO", "everything"}} {
		got, want := w.both(arg...)
		for _, header := range []string{"# Commandstats", "# Errorstats", "# Latencystats"} {
			if strings.Contains(got, header) != strings.Contains(want, header) {
				t.Fatalf("%q: %s in sluice %v, in redis %v", arg, header, strings.Contains(got, header), strings.Contains(want, header))
			}
		}
	}
	w.same("CONFIG", "RESETSTAT")
	w.same("INFO", "errorstats")
	if got, _ := w.both("INFO", "commandstats"); strings.Contains(got, "cmdstat_get") {
		t.Fatalf("CONFIG RESETSTAT left commandstats: %q", got)
	}
	w.same("SLOWLOG", "LEN") // RESETSTAT leaves the slow log

	// LATENCY.
	w.same("LATENCY", "HELP")
	w.same("LATENCY", "LATEST")
	w.same("LATENCY", "HISTORY", "command")
	w.same("LATENCY", "RESET")
	w.same("LATENCY", "GRAPH", "command")
	w.same("LATENCY", "HISTORY")
	w.same("LATENCY", "NOPE")
	w.same("CONFIG", "SET", "latency-monitor-threshold", "5")
	w.same("CONFIG", "SET", "slowlog-log-slower-than", "-1")
	// A command slower than 5 ms on either: Sluice's interpreter is slower
	// than Redis's, so each gets the loop it needs.
	w.sluice.Do(t, "EVAL", "local x = 0 for i = 1, 1000000 do x = x + i end return x", "0")
	w.redis.Do(t, "EVAL", "local x = 0 for i = 1, 20000000 do x = x + i end return x", "0")
	got, want = w.both("LATENCY", "LATEST")
	if g, r := maskInts(t, got), maskInts(t, want); g != r {
		t.Fatalf("LATENCY LATEST:\n sluice %s\n redis  %s", g, r)
	}
	got, want = w.both("LATENCY", "HISTORY", "command")
	if g, r := maskInts(t, got), maskInts(t, want); g != r {
		t.Fatalf("LATENCY HISTORY:\n sluice %s\n redis  %s", g, r)
	}
	w.same("LATENCY", "RESET", "command", "nope")
	w.same("LATENCY", "LATEST")
	w.same("SLOWLOG", "LEN") // -1: nothing was logged
}

// The slow log catches a command slower than its threshold, alone or
// pipelined behind fast ones, and logs nothing at -1.
func TestSlowlogCatchesSlowCommand(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	slow := "local x = 0 for i = 1, 2000000 do x = x + i end return x"
	c.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "-1")
	c.Do(t, "EVAL", slow, "0")
	if got := c.Do(t, "SLOWLOG", "LEN"); got != ":0\r\n" {
		t.Fatalf("slowlog-log-slower-than -1 logged: %q", got)
	}
	// 20 ms: a 2-million-step loop takes several times that.
	c.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "20000")
	c.Do(t, "CLIENT", "SETNAME", "slowpoke")
	c.Do(t, "EVAL", slow, "0")
	entries := parseRESP(t, c.Do(t, "SLOWLOG", "GET")).([]any)
	if len(entries) != 1 {
		t.Fatalf("want the EVAL alone, got %q", entries)
	}
	e := entries[0].([]any)
	if args := e[3].([]any); args[0] != "EVAL" || args[1] != slow || e[5] != "slowpoke" || e[2].(int64) < 20000 {
		t.Fatalf("entry %q", e)
	}
	if got := c.Do(t, "INFO", "commandstats"); !strings.Contains(got, "cmdstat_eval:calls=2,") {
		t.Fatalf("INFO commandstats: %q", got)
	}
}

// The Prometheus metrics carry the counts INFO has, by the same names.
func TestCommandMetrics(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	c.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	c.Do(t, "SET", "k", "v")
	c.Do(t, "HSET", "k", "f", "v")
	c.Do(t, "GET")
	c.Do(t, "CONFIG", "GET", "maxmemory")
	rec := httptest.NewRecorder()
	ts.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sluice_commands_total{command="set"} 1`,
		`sluice_commands_total{command="config|get"} 1`,
		`sluice_command_failures_total{command="hset",kind="failed"} 1`,
		`sluice_command_failures_total{command="get",kind="rejected"} 1`,
		`sluice_errors_total{error="WRONGTYPE"} 1`,
		`sluice_errors_total{error="ERR"} 1`,
		`sluice_command_duration_seconds_bucket{command="set",le="1.048576"} 1`,
		`sluice_command_duration_seconds_count{command="set"} 1`,
		`sluice_slowlog_length 4`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	c.Do(t, "CONFIG", "SET", "latency-tracking", "no")
	c.Do(t, "CONFIG", "RESETSTAT")
	c.Do(t, "SET", "k", "v")
	rec = httptest.NewRecorder()
	ts.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body = rec.Body.String()
	if !strings.Contains(body, `sluice_commands_total{command="set"} 1`+"\n") || strings.Contains(body, "sluice_command_duration_seconds_count") {
		t.Errorf("latency-tracking no: want counts and no histograms:\n%s", body)
	}
}
