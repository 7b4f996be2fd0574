package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// concReply is CONC.ACQUIRE's reply as go-redis decodes it.
func concReply(acquired int64, id any, holders, nextMS int64) []any {
	return []any{acquired, id, holders, nextMS}
}

// The CONC commands over the wire at a frozen clock: exact replies, a
// killed holder's slot (never released) free exactly at its lease's end to
// the millisecond, renewals, idempotent acquisition, and the key commands
// every limiter answers.
func TestConcTranscript(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	now := sluicetest.FreezeClock(t, ts.Client)
	gen := fmt.Sprintf("%d-1", now*1e6) // the first id the server makes at now

	ts.Expect(t, concReply(1, gen, 1, 1500), "CONC.ACQUIRE", "jobs", "2", "1.5")
	ts.Expect(t, concReply(1, "w2", 2, 1500), "CONC.ACQUIRE", "jobs", "2", "10", "ID", "w2")
	ts.Expect(t, concReply(0, nil, 2, 1500), "CONC.ACQUIRE", "jobs", "2", "10", "ID", "w3")
	ts.Expect(t, "concurrency", "TYPE", "jobs")
	ts.Expect(t, int64(1), "EXISTS", "jobs")
	ts.Expect(t, int64(10), "TTL", "jobs")
	ts.Expect(t, int64(10000), "PTTL", "jobs")
	ts.Expect(t, []any{"family", "concurrency", "max", int64(2), "holders", int64(2), "next_expiry_ms", int64(1500),
		"reset_at_ms", now + 10000, "reset_after_ms", int64(10000)}, "LIMIT.INFO", "jobs")

	// The first holder is killed: it never releases. Its slot is held for
	// the whole lease and free at its end, with nothing in between.
	sluicetest.AdvanceClock(t, ts.Client, 1499e6)
	ts.Expect(t, concReply(0, nil, 2, 1), "CONC.ACQUIRE", "jobs", "2", "10", "ID", "w3")
	sluicetest.AdvanceClock(t, ts.Client, 1e6)
	ts.Expect(t, concReply(1, "w3", 2, 8500), "CONC.ACQUIRE", "jobs", "2", "10", "ID", "w3")
	ts.Expect(t, int64(0), "CONC.RELEASE", "jobs", gen)

	// RENEW moves a live lease's end; an unknown id renews nothing.
	ts.Expect(t, int64(1), "CONC.RENEW", "jobs", "w2", "30")
	ts.Expect(t, int64(30000), "PTTL", "jobs")
	ts.Expect(t, int64(0), "CONC.RENEW", "jobs", "nobody", "30")
	ts.Expect(t, int64(1), "CONC.RELEASE", "jobs", "w3")
	ts.Expect(t, int64(0), "CONC.RELEASE", "jobs", "w3")
	// Acquiring with an id that holds a lease renews it, even at a max
	// the holders already fill.
	ts.Expect(t, concReply(1, "w2", 1, 5000), "CONC.ACQUIRE", "jobs", "1", "5", "ID", "w2")
	ts.Expect(t, concReply(0, nil, 1, 5000), "CONC.ACQUIRE", "jobs", "1", "5")
	sluicetest.AdvanceClock(t, ts.Client, 4999e6)
	ts.Expect(t, int64(1), "EXISTS", "jobs")
	sluicetest.AdvanceClock(t, ts.Client, 1e6)
	// Its last lease over, the key is gone.
	ts.Expect(t, int64(0), "EXISTS", "jobs")
	ts.Expect(t, int64(-2), "PTTL", "jobs")
	ts.Expect(t, nil, "LIMIT.INFO", "jobs")

	// The key commands every limiter answers.
	ts.Expect(t, concReply(1, "a", 1, 60000), "CONC.ACQUIRE", "k", "3", "60", "ID", "a")
	ts.Expect(t, errors.New("ERR LIMIT.REFUND does not apply to a concurrency key; release the lease with CONC.RELEASE"), "LIMIT.REFUND", "k", "1")
	ts.Expect(t, errors.New("ERR a rate limiter key expires at its reset time; use LIMIT.RESET to forget it"), "EXPIRE", "k", "10")
	ts.Expect(t, errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), "CL.THROTTLE", "k", "1", "1", "1")
	ts.Expect(t, []any{"k"}, "KEYS", "*")
	ts.Expect(t, "OK", "SET", "str", "v")
	if got := scanAll(t, ts, "TYPE", "concurrency"); fmt.Sprint(got) != "[k]" {
		t.Fatalf("SCAN TYPE concurrency: %v", got)
	}
	ts.Expect(t, int64(1), "DEL", "str")
	ts.Expect(t, int64(1), "LIMIT.RESET", "k")
	ts.Expect(t, int64(0), "EXISTS", "k")
	ts.Expect(t, concReply(1, "a", 1, 60000), "CONC.ACQUIRE", "k", "3", "60", "ID", "a")
	ts.Expect(t, int64(1), "DEL", "k")
	ts.Expect(t, int64(0), "DBSIZE")
}

// scanAll runs SCAN to the end and returns the keys.
func scanAll(t *testing.T, ts *sluicetest.Server, args ...any) []any {
	t.Helper()
	var keys []any
	cursor := "0"
	for {
		v := ts.Do(t, append([]any{"SCAN", cursor}, args...)...).([]any)
		keys = append(keys, v[1].([]any)...)
		if cursor = v[0].(string); cursor == "0" {
			return keys
		}
	}
}

// Bad input: each gets its exact error, or, for an id that holds no lease,
// its exact 0, and none changes anything: DBSIZE and the keys' state are
// as they were.
func TestConcBadInput(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	now := sluicetest.FreezeClock(t, ts.Client)
	ts.Expect(t, concReply(1, "a", 1, 60000), "CONC.ACQUIRE", "k", "2", "60", "ID", "a")
	ts.Expect(t, "OK", "SET", "str", "v")
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "gcra", "4", "1", "10")
	info := []any{"family", "concurrency", "max", int64(2), "holders", int64(1), "next_expiry_ms", int64(60000),
		"reset_at_ms", now + 60000, "reset_after_ms", int64(60000)}
	ts.Expect(t, info, "LIMIT.INFO", "k")

	long := strings.Repeat("x", 65)
	wrongType := "WRONGTYPE Operation against a key holding the wrong kind of value"
	cases := []struct {
		args []any
		want any // an error text, or an integer reply
	}{
		{[]any{"CONC.ACQUIRE", "k", "0", "10"}, "ERR invalid max '0': must be positive"},
		{[]any{"CONC.ACQUIRE", "new", "-3", "10"}, "ERR invalid max '-3': must be positive"},
		{[]any{"CONC.ACQUIRE", "new", "x", "10"}, "ERR invalid max 'x': value is not an integer or out of range"},
		{[]any{"CONC.ACQUIRE", "new", "2.5", "10"}, "ERR invalid max '2.5': value is not an integer or out of range"},
		{[]any{"CONC.ACQUIRE", "new", "65537", "10"}, "ERR invalid max '65537': is too large for a concurrency limit (at most 65536)"},
		{[]any{"CONC.ACQUIRE", "new", "5", "0"}, "ERR invalid lease_seconds '0': must be positive"},
		{[]any{"CONC.ACQUIRE", "new", "5", "-1"}, "ERR invalid lease_seconds '-1': must not be negative"},
		{[]any{"CONC.ACQUIRE", "new", "5", "abc"}, "ERR invalid lease_seconds 'abc': is not a valid number of seconds"},
		{[]any{"CONC.ACQUIRE", "k", "5", "10", "ID", ""}, "ERR invalid id '': must be 1 to 64 bytes"},
		{[]any{"CONC.ACQUIRE", "k", "5", "10", "ID", long}, "ERR invalid id '" + long[:64] + "...': must be 1 to 64 bytes"},
		{[]any{"CONC.ACQUIRE", "k", "5", "10", "ID"}, "ERR syntax error"},
		{[]any{"CONC.ACQUIRE", "k", "5", "10", "NAME", "a"}, "ERR syntax error"},
		{[]any{"CONC.ACQUIRE", "k", "5", "10", "ID", "a", "b"}, "ERR syntax error"},
		{[]any{"CONC.ACQUIRE", "k", "5"}, "ERR wrong number of arguments for 'conc.acquire' command"},
		{[]any{"CONC.RELEASE", "k"}, "ERR wrong number of arguments for 'conc.release' command"},
		{[]any{"CONC.RELEASE", "k", ""}, "ERR invalid id '': must be 1 to 64 bytes"},
		{[]any{"CONC.RENEW", "k", "a", "0"}, "ERR invalid lease_seconds '0': must be positive"},
		{[]any{"CONC.RENEW", "k", "a", "-2"}, "ERR invalid lease_seconds '-2': must not be negative"},
		{[]any{"CONC.RENEW", "k", "", "1"}, "ERR invalid id '': must be 1 to 64 bytes"},
		{[]any{"CONC.RENEW", "k", "a"}, "ERR wrong number of arguments for 'conc.renew' command"},
		// Unknown lease ids and missing keys: 0, and nothing is created.
		{[]any{"CONC.RELEASE", "k", "nosuch"}, int64(0)},
		{[]any{"CONC.RENEW", "k", "nosuch", "10"}, int64(0)},
		{[]any{"CONC.RELEASE", "new", "a"}, int64(0)},
		{[]any{"CONC.RENEW", "new", "a", "10"}, int64(0)},
		// Another family's key.
		{[]any{"CONC.ACQUIRE", "str", "5", "10"}, wrongType},
		{[]any{"CONC.ACQUIRE", "gcra", "5", "10", "ID", "a"}, wrongType},
		{[]any{"CONC.RELEASE", "str", "a"}, wrongType},
		{[]any{"CONC.RENEW", "gcra", "a", "10"}, wrongType},
		{[]any{"SW.CHECK", "k", "10", "10"}, wrongType},
	}
	for _, c := range cases {
		if text, ok := c.want.(string); ok {
			ts.Expect(t, errors.New(text), c.args...)
		} else {
			ts.Expect(t, c.want, c.args...)
		}
	}
	ts.Expect(t, int64(3), "DBSIZE")
	ts.Expect(t, info, "LIMIT.INFO", "k")
	ts.Expect(t, "v", "GET", "str")
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "gcra", "4", "1", "10", "0")
	ts.Expect(t, int64(0), "EXISTS", "new")
}

// COMMAND knows the three commands from their rows: arity, flags, keys,
// categories.
func TestConcCommandInfo(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	v := ts.Do(t, "COMMAND", "INFO", "conc.acquire", "conc.release", "conc.renew").([]any)
	want := []string{
		"[conc.acquire -4 [write denyoom] 1 1 1 [@write @slow @limiter] [] [] []]",
		"[conc.release 3 [write] 1 1 1 [@write @slow @limiter] [] [] []]",
		"[conc.renew 4 [write] 1 1 1 [@write @slow @limiter] [] [] []]",
	}
	for i, w := range want {
		if got := fmt.Sprint(v[i]); got != w {
			t.Errorf("COMMAND INFO %d:\n got %s\nwant %s", i, got, w)
		}
	}
	// In @limiter, so that an application's user allowed +@limiter can
	// use them (docs/security.md).
	cat := fmt.Sprint(ts.Do(t, "ACL", "CAT", "limiter"))
	for _, name := range []string{"conc.acquire", "conc.release", "conc.renew"} {
		if !strings.Contains(cat, name) {
			t.Errorf("ACL CAT limiter %s lacks %s", cat, name)
		}
	}
}

// CONC.ACQUIRE inside LIMIT.ALL: a request takes a rate slot and a
// concurrency slot all or nothing, over the wire; the options a limit does
// not take are refused, changing nothing.
func TestConcInLimitAll(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	now := sluicetest.FreezeClock(t, ts.Client)
	all := func(id string) string {
		return c.Do(t, "LIMIT.ALL", "2", "CL.THROTTLE", "user", "4", "10", "1", "1",
			"CONC.ACQUIRE", "exports", "1", "30", "ID", id)
	}
	if got := all("job-1"); got != "*3\r\n:0\r\n:-1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:1\r\n*4\r\n:1\r\n$5\r\njob-1\r\n:1\r\n:30000\r\n" {
		t.Fatalf("first: %q", got)
	}
	// Full: the concurrency limit trips (index 1) and the GCRA key is not
	// charged.
	if got := all("job-2"); got != "*3\r\n:1\r\n:1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:3\r\n:-1\r\n:1\r\n*4\r\n:0\r\n$-1\r\n:1\r\n:30000\r\n" {
		t.Fatalf("a full concurrency key: %q", got)
	}
	if got := c.Do(t, "CL.THROTTLE", "user", "4", "10", "1", "0"); got != "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:1\r\n" {
		t.Fatalf("the refused LIMIT.ALL charged the GCRA key: %q", got)
	}
	// The lease given back (the key goes with its last lease), a
	// server-made id.
	if got := c.Do(t, "CONC.RELEASE", "exports", "job-1"); got != ":1\r\n" {
		t.Fatalf("release: %q", got)
	}
	gen := fmt.Sprintf("%d-1", now*1e6)
	want := fmt.Sprintf("*3\r\n:0\r\n:-1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:3\r\n:-1\r\n:1\r\n*4\r\n:1\r\n$%d\r\n%s\r\n:1\r\n:30000\r\n", len(gen), gen)
	if got := c.Do(t, "LIMIT.ALL", "2", "CL.THROTTLE", "user", "4", "10", "1", "1", "CONC.ACQUIRE", "exports", "1", "30"); got != want {
		t.Fatalf("without an id: %q, want %q", got, want)
	}
	if got := c.Do(t, "INFO", "stats"); !strings.Contains(got, "leases_acquired:2\r\n") || !strings.Contains(got, "leases_refused:1\r\n") {
		t.Fatalf("INFO stats counts the leases LIMIT.ALL took and was refused: %q", got)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"CONC.ACQUIRE", "exports", "1", "30", "MS"}, "-ERR syntax error\r\n"},
		{[]string{"CONC.ACQUIRE", "exports", "1", "30", "ID", "a", "ID", "b"}, "-ERR syntax error\r\n"},
		{[]string{"CONC.ACQUIRE", "exports", "0", "30"}, "-ERR invalid max '0': must be positive\r\n"},
		{[]string{"CONC.ACQUIRE", "exports", "1", "-1"}, "-ERR invalid lease_seconds '-1': must not be negative\r\n"},
		{[]string{"CONC.ACQUIRE", "exports", "1"}, "-ERR invalid conc.acquire 'CONC.ACQUIRE': is missing arguments\r\n"},
		{[]string{"CONC.ACQUIRE", "user", "1", "30"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
	} {
		args := append([]string{"LIMIT.ALL", "2", "FW.CHECK", "fw", "5", "60", "1"}, bad.args...)
		if got := c.Do(t, args...); got != bad.want {
			t.Errorf("%q: %q, want %q", args, got, bad.want)
		}
	}
	if got := c.Do(t, "EXISTS", "fw"); got != ":0\r\n" {
		t.Fatalf("a refused LIMIT.ALL created its fixed window: %q", got)
	}
	// The shortest LIMIT.ALL: one lease, six arguments.
	if got := c.Do(t, "LIMIT.ALL", "1", "CONC.ACQUIRE", "solo", "1", "30", "ID", "x"); got != "*3\r\n:0\r\n:-1\r\n*1\r\n*4\r\n:1\r\n$1\r\nx\r\n:1\r\n:30000\r\n" {
		t.Fatalf("LIMIT.ALL over one lease: %q", got)
	}
	if got := c.Do(t, "LIMIT.ALL", "1", "CONC.ACQUIRE", "solo", "1"); got != "-ERR wrong number of arguments for 'limit.all' command\r\n" {
		t.Fatalf("LIMIT.ALL too short: %q", got)
	}
}
