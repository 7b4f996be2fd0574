package server_test

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// hotEntry is one LIMIT.HOTKEYS entry.
type hotEntry struct {
	key        string
	count, err int64
	rate       string
}

func hotKeys(t *testing.T, rdb *redis.Client, args ...any) []hotEntry {
	t.Helper()
	v, err := rdb.Do(context.Background(), append([]any{"LIMIT.HOTKEYS"}, args...)...).Slice()
	if err != nil {
		t.Fatalf("LIMIT.HOTKEYS %v: %v", args, err)
	}
	var out []hotEntry
	for _, item := range v {
		e := item.([]any)
		out = append(out, hotEntry{e[0].(string), e[1].(int64), e[2].(int64), e[3].(string)})
	}
	return out
}

// hotWindowMS is the sketch window in ms; the tests freeze the clock at a
// window's start, so a rate is its count over the window.
const hotWindowMS = engine.HotKeysWindow / 1e6

func frozenAtWindowStart(t *testing.T, ts *sluicetest.Server) int64 {
	now := sluicetest.FreezeClock(t, ts.Client)
	now += hotWindowMS - now%hotWindowMS
	sluicetest.SetClock(t, ts.Client, now)
	return now
}

// TestHotKeysZipf sends zipf traffic over a million keys, with planted hot
// keys among it (some refused a lot), through a real server, and counts
// the truth from what it sent and what was refused. LIMIT.HOTKEYS, by
// decisions and by refusals, must list the planted keys first, hottest
// first, and every entry's count must be within its error of the truth.
func TestHotKeysZipf(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Engine: engine.Config{Shards: 8}})
	frozenAtWindowStart(t, ts)
	background := 100_000
	if testing.Short() {
		background = 30_000
	}
	// Zipf over 1M keys, its head flattened (v = 50) so that the planted
	// keys stand above it; a background key refuses from its second decision.
	r := rand.New(rand.NewSource(20))
	zipf := rand.NewZipf(r, 1.1, 50, 1_000_000-1)
	type req struct{ key, burst string }
	var reqs []req
	for range background {
		reqs = append(reqs, req{"bg:" + strconv.FormatUint(zipf.Uint64(), 10), "0"})
	}
	planted := []struct {
		key, burst string
		n          int
	}{
		// Allowed throughout, or refused all but once. Neighbours' gaps
		// are above twice any Space-Saving error (N per shard / 128) and
		// five standard deviations of their difference once a shard
		// samples (past 8192 decisions in its window, as here), the
		// smallest far above the background's largest (about 320).
		{"hot:1", "100000", 19500}, {"deny:1", "0", 15500}, {"hot:2", "100000", 12200},
		{"deny:2", "0", 9200}, {"hot:3", "100000", 6600}, {"deny:3", "0", 4500},
		{"hot:4", "100000", 2800}, {"hot:5", "100000", 1500},
	}
	scale := float64(background) / 100_000
	for _, p := range planted {
		for range int(float64(p.n) * scale) {
			reqs = append(reqs, req{p.key, p.burst})
		}
	}
	r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })

	decisions, refusals := map[string]int64{}, map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	const workers, pipeline = 4, 1000
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := w * pipeline; from < len(reqs); from += workers * pipeline {
				part := reqs[from:min(from+pipeline, len(reqs))]
				pipe := ts.Client.Pipeline()
				cmds := make([]*redis.Cmd, len(part))
				for i, q := range part {
					cmds[i] = pipe.Do(context.Background(), "CL.THROTTLE", q.key, q.burst, "1", "60")
				}
				if _, err := pipe.Exec(context.Background()); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, q := range part {
					decisions[q.key]++
					if v, _ := cmds[i].Slice(); v[0].(int64) == 1 {
						refusals[q.key]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	for _, by := range []struct {
		name  string
		truth map[string]int64
	}{{"decisions", decisions}, {"refusals", refusals}} {
		t.Run(by.name, func(t *testing.T) {
			var want []string // the planted keys, by their true count
			for _, p := range planted {
				if by.truth[p.key] > 0 {
					want = append(want, p.key)
				}
			}
			sort.Slice(want, func(i, j int) bool { return by.truth[want[i]] > by.truth[want[j]] })
			// The test's own premise: the planted keys are the true top.
			var top []string
			for k := range by.truth {
				top = append(top, k)
			}
			sort.Slice(top, func(i, j int) bool { return by.truth[top[i]] > by.truth[top[j]] })
			if fmt.Sprint(top[:len(want)]) != fmt.Sprint(want) {
				t.Fatalf("premise: true top %v, planted %v", top[:len(want)], want)
			}
			got := hotKeys(t, ts.Client, "BY", by.name, "COUNT", engine.HotKeysCapacity)
			if len(got) != engine.HotKeysCapacity {
				t.Fatalf("%d entries, want %d", len(got), engine.HotKeysCapacity)
			}
			var keys []string
			var maxErr int64 // the tail's entries are where the bounds bite
			for i, e := range got {
				maxErr = max(maxErr, e.err)
				if i < len(want) {
					keys = append(keys, e.key)
				}
				truth := by.truth[e.key]
				if truth < e.count-e.err || truth > e.count+e.err {
					t.Fatalf("%s: count %d error %d, true %d", e.key, e.count, e.err, truth)
				}
				// Frozen at the window's start: the rate is count / 10 s.
				if wantRate := strconv.FormatFloat(float64(e.count)/10, 'f', -1, 64); e.rate != wantRate {
					t.Fatalf("%s: rate %s, want %s", e.key, e.rate, wantRate)
				}
			}
			if fmt.Sprint(keys) != fmt.Sprint(want) {
				t.Fatalf("top %v, want %v", keys, want)
			}
			t.Logf("%d entries within their bounds, the largest error %d", len(got), maxErr)
			for _, e := range got[:len(want)] {
				t.Logf("%s: count %d error %d (true %d), rate %s/s", e.key, e.count, e.err, by.truth[e.key], e.rate)
			}
			if d := hotKeys(t, ts.Client, "BY", by.name); len(d) != 10 || fmt.Sprint(d) != fmt.Sprint(got[:10]) {
				t.Fatalf("default COUNT: %v, want the first 10 of %v", d, got[:10])
			}
		})
	}
}

// TestHotKeysWhatCounts: every decision with a cost counts, on every
// limiter family and inside LIMIT.ALL (a tripped LIMIT.ALL counts its
// tripping limit, refused); peeks and REQID retries do not; the counts move
// to the previous window and then drop out as the clock advances.
func TestHotKeysWhatCounts(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	frozenAtWindowStart(t, ts)
	for _, cmd := range [][]any{
		{"CL.THROTTLE", "gcra", "0", "1", "60"},
		{"CL.THROTTLE", "gcra", "0", "1", "60"},      // refused
		{"CL.THROTTLE", "gcra", "0", "1", "60", "0"}, // a peek
		{"SW.CHECK", "sw", "1", "60"},
		{"SW.CHECK", "sw", "1", "60", "0"}, // a peek
		{"SL.CHECK", "sl", "1", "60"},
		{"FW.CHECK", "fw", "1", "60"},
		{"LB.RESERVE", "lb", "10", "1", "1", "1", "MAXWAIT", "0"},
		{"CONC.ACQUIRE", "conc", "1", "60"},
		{"CONC.ACQUIRE", "conc", "1", "60"}, // refused
		{"CL.THROTTLE", "retried", "5", "1", "60", "1", "REQID", "r1"},
		{"CL.THROTTLE", "retried", "5", "1", "60", "1", "REQID", "r1"}, // answered from the receipt
		{"LIMIT.ALL", "2", "SW.CHECK", "all:a", "5", "60", "1", "FW.CHECK", "all:b", "5", "60", "1"},
		{"LIMIT.ALL", "2", "SW.CHECK", "all:a", "5", "60", "1", "FW.CHECK", "all:b", "5", "60", "6"}, // all:b trips
		{"LIMIT.ALL", "1", "SW.CHECK", "all:a", "5", "60", "0"},                                      // a peek
	} {
		ts.Do(t, cmd...)
	}
	counts := func(by string) map[string]int64 {
		m := map[string]int64{}
		for _, e := range hotKeys(t, ts.Client, "BY", by, "COUNT", 100) {
			m[e.key] = e.count
			if e.err != 0 {
				t.Fatalf("%s: error %d with fewer keys than counters", e.key, e.err)
			}
		}
		return m
	}
	want := map[string]int64{"gcra": 2, "sw": 1, "sl": 1, "fw": 1, "lb": 1, "conc": 2, "retried": 1, "all:a": 1, "all:b": 2}
	if got := counts("decisions"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions: %v, want %v", got, want)
	}
	wantRefused := map[string]int64{"gcra": 1, "conc": 1, "all:b": 1}
	if got := counts("refusals"); fmt.Sprint(got) != fmt.Sprint(wantRefused) {
		t.Fatalf("refusals: %v, want %v", got, wantRefused)
	}
	ts.Expect(t, int64(2), "OBJECT", "FREQ", "gcra")
	ts.Do(t, "SET", "plain", "x")
	ts.Expect(t, int64(0), "OBJECT", "FREQ", "plain")
	ts.Expect(t, nil, "OBJECT", "FREQ", "missing")

	// The next window: the same counts, the rate still over the whole
	// previous window; half way through it, half that; a window later,
	// nothing.
	rate := func() string { return hotKeys(t, ts.Client)[0].rate }
	ts.Do(t, "DEBUG", "CLOCK", "ADVANCE", hotWindowMS)
	// Ties in rate and count rank by key.
	if e := hotKeys(t, ts.Client)[0]; e != (hotEntry{"all:b", 2, 0, "0.2"}) {
		t.Fatalf("next window: %+v", e)
	}
	ts.Do(t, "DEBUG", "CLOCK", "ADVANCE", hotWindowMS/2)
	if r := rate(); r != "0.1" {
		t.Fatalf("half way: rate %s, want 0.1", r)
	}
	ts.Do(t, "DEBUG", "CLOCK", "ADVANCE", hotWindowMS)
	if got := hotKeys(t, ts.Client); len(got) != 0 {
		t.Fatalf("two windows on: %v", got)
	}
}

// TestHotKeysArguments: bad arguments get an error naming them and change
// nothing; RESP3 has the rate as a double.
func TestHotKeysArguments(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	frozenAtWindowStart(t, ts)
	for range 3 {
		ts.Do(t, "CL.THROTTLE", "k", "0", "1", "60")
	}
	before := hotKeys(t, ts.Client, "BY", "refusals")
	for _, c := range []struct {
		args []any
		err  string
	}{
		{[]any{"COUNT", "0"}, "ERR invalid COUNT '0': must be positive"},
		{[]any{"COUNT", "-3"}, "ERR invalid COUNT '-3': must be positive"},
		{[]any{"COUNT", "129"}, "ERR invalid COUNT '129': must be at most 128"},
		{[]any{"COUNT", "x"}, "ERR invalid COUNT 'x': value is not an integer or out of range"},
		{[]any{"BY", "keys"}, "ERR invalid BY 'keys': must be decisions or refusals"},
		{[]any{"COUNT"}, "ERR syntax error"},
		{[]any{"ORDER", "x"}, "ERR syntax error"},
		{[]any{"BY", "refusals", "COUNT"}, "ERR syntax error"},
	} {
		err := ts.Client.Do(context.Background(), append([]any{"LIMIT.HOTKEYS"}, c.args...)...).Err()
		if err == nil || err.Error() != c.err {
			t.Fatalf("LIMIT.HOTKEYS %v: %v, want %q", c.args, err, c.err)
		}
	}
	if after := hotKeys(t, ts.Client, "BY", "refusals"); fmt.Sprint(after) != fmt.Sprint(before) || fmt.Sprint(after) != "[{k 2 0 0.2}]" {
		t.Fatalf("after bad arguments: %v, before %v", after, before)
	}
	ts.Expect(t, []any{[]any{"k", int64(3), int64(0), "0.3"}}, "LIMIT.HOTKEYS", "by", "DECISIONS", "count", "1")

	raw := sluicetest.DialRaw(t, "tcp", ts.Addr)
	raw.Do(t, "HELLO", "3")
	if got, want := raw.Do(t, "LIMIT.HOTKEYS"), "*1\r\n*4\r\n$1\r\nk\r\n:3\r\n:0\r\n,0.3\r\n"; got != want {
		t.Fatalf("RESP3: %q, want %q", got, want)
	}
}

// TestHotKeysTrackingSwitch: hotkeys-tracking no stops the counting and
// frees the sketches; INFO and CONFIG GET say so; OBJECT FREQ then answers
// exactly what Redis does without an LFU policy (compared byte for byte
// with a real Redis); yes starts again from nothing.
func TestHotKeysTrackingSwitch(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	rd := sluicetest.StartRedis(t)
	info := func() string {
		s, err := ts.Client.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ts.Do(t, "CL.THROTTLE", "k", "0", "1", "60")
	if !strings.Contains(info(), "hotkeys_tracking:yes\r\n") {
		t.Fatalf("INFO stats lacks hotkeys_tracking:yes:\n%s", info())
	}
	ts.Expect(t, []any{"hotkeys-tracking", "yes"}, "CONFIG", "GET", "hotkeys-tracking")
	ts.Expect(t, fmt.Errorf("ERR CONFIG SET failed (possibly related to argument 'hotkeys-tracking') - argument must be 'yes' or 'no'"), "CONFIG", "SET", "hotkeys-tracking", "maybe")
	ts.Expect(t, "OK", "CONFIG", "SET", "hotkeys-tracking", "no")
	ts.Expect(t, []any{"hotkeys-tracking", "no"}, "CONFIG", "GET", "hotkeys-tracking")
	if !strings.Contains(info(), "hotkeys_tracking:no\r\n") {
		t.Fatalf("INFO stats lacks hotkeys_tracking:no:\n%s", info())
	}
	ts.Expect(t, fmt.Errorf("ERR hot-key tracking is off (CONFIG SET hotkeys-tracking yes turns it on)"), "LIMIT.HOTKEYS")
	ts.Do(t, "CL.THROTTLE", "k", "0", "1", "60")

	// Redis without an LFU policy, on an existing key.
	sl := sluicetest.DialRaw(t, "tcp", ts.Addr)
	rr := sluicetest.DialRaw(t, rd.Network, rd.Addr)
	rr.Do(t, "SET", "k", "x")
	if got, want := sl.Do(t, "OBJECT", "FREQ", "k"), rr.Do(t, "OBJECT", "FREQ", "k"); got != want {
		t.Fatalf("OBJECT FREQ with tracking off: %q, Redis %q", got, want)
	}

	ts.Expect(t, "OK", "CONFIG", "SET", "hotkeys-tracking", "YES")
	ts.Expect(t, []any{}, "LIMIT.HOTKEYS")
	ts.Do(t, "CL.THROTTLE", "k", "0", "1", "60")
	if got := hotKeys(t, ts.Client, "BY", "refusals"); len(got) != 1 || got[0].key != "k" || got[0].count != 1 {
		t.Fatalf("tracking again: %v", got)
	}
}

// TestHotKeysMetrics: the scrape carries the top keys of each ranking as
// gauges labelled by rank and key, at most 10 of each.
func TestHotKeysMetrics(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	frozenAtWindowStart(t, ts)
	pipe := ts.Client.Pipeline()
	for i := range 30 {
		for range i + 1 {
			pipe.Do(context.Background(), "CL.THROTTLE", "m"+strconv.Itoa(i), strconv.Itoa(i), "1", "60")
		}
	}
	pipe.Do(context.Background(), "CL.THROTTLE", "bad\xff", "0", "1", "60")
	pipe.Do(context.Background(), "CL.THROTTLE", "bad\xff", "0", "1", "60")
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	ts.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	var decisions, refusals []string
	for _, line := range strings.Split(string(body), "\n") {
		switch {
		case strings.HasPrefix(line, "sluice_hot_key_decisions_per_second{"):
			decisions = append(decisions, line)
		case strings.HasPrefix(line, "sluice_hot_key_refusals_per_second{"):
			refusals = append(refusals, line)
		}
	}
	if len(decisions) != 10 || len(refusals) != 1 {
		t.Fatalf("%d decision and %d refusal series, want 10 and 1:\n%s", len(decisions), len(refusals), body)
	}
	// m29 took 30 decisions, m28 29, ...: rank r is m(30-r), at (31-r)/10 per second.
	var want []string
	for rank := 1; rank <= 10; rank++ {
		want = append(want, fmt.Sprintf(`sluice_hot_key_decisions_per_second{key="m%d",rank="%d"} %s`, 30-rank, rank, strconv.FormatFloat(float64(31-rank)/10, 'f', -1, 64)))
	}
	sort.Strings(want)
	sort.Strings(decisions)
	if fmt.Sprint(decisions) != fmt.Sprint(want) {
		t.Fatalf("series %q, want %q", decisions, want)
	}
	if want := "sluice_hot_key_refusals_per_second{key=\"bad\uFFFD\",rank=\"1\"} 0.1"; refusals[0] != want {
		t.Fatalf("refusal series %q, want %q", refusals[0], want)
	}
}

// TestHotKeysRedisCLI runs the real redis-cli --hotkeys, which scans the
// key space and ranks the keys by OBJECT FREQ: the planted key comes out
// on top with its decisions as the counter.
func TestHotKeysRedisCLI(t *testing.T) {
	cli := sluicetest.Require(t, "redis-cli")
	ts := sluicetest.Start(t, sluicetest.Options{})
	frozenAtWindowStart(t, ts)
	pipe := ts.Client.Pipeline()
	for i := range 200 {
		pipe.Do(context.Background(), "SW.CHECK", "user:"+strconv.Itoa(i), "100", "60")
	}
	for range 500 {
		pipe.Do(context.Background(), "SW.CHECK", "planted", "100", "60")
	}
	pipe.Set(context.Background(), "a-string", "x", 0)
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(ts.Addr, ":")
	out, err := exec.Command(cli, "-h", host, "-p", port, "--hotkeys").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --hotkeys: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Sampled 202 keys in the keyspace!") ||
		!strings.Contains(string(out), "hot key found with counter: 500\tkeyname: \"planted\"\n") {
		t.Fatalf("redis-cli --hotkeys:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var summary []string
	for _, l := range lines {
		if strings.HasPrefix(l, "hot key found with counter: ") {
			summary = append(summary, l)
		}
	}
	if len(summary) == 0 || summary[0] != "hot key found with counter: 500\tkeyname: \"planted\"" {
		t.Fatalf("planted key not first:\n%s", out)
	}
}
