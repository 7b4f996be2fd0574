package server_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// LB.RESERVE and LB.CANCEL over the wire: replies, errors that name their
// argument and change nothing, and the family everywhere limiters are.
func TestLeakyBucketCommands(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	sluicetest.FreezeClock(t, ts.Client)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"LB.RESERVE", "api", "0", "1"}, "-ERR invalid rate '0': must be positive\r\n"},
		{[]string{"LB.RESERVE", "api", "-5", "1"}, "-ERR invalid rate '-5': must be positive\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "0"}, "-ERR invalid period '0': must be positive\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "0"}, "-ERR invalid burst '0': must be positive\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "1", "-1"}, "-ERR invalid cost '-1': must not be negative\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "1", "1", "MAXWAIT", "-3"}, "-ERR invalid maxwait '-3': must not be negative\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "1", "1", "MAXWAIT"}, "-ERR syntax error\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "MS", "1"}, "-ERR syntax error\r\n"},
		{[]string{"LB.RESERVE", "api", "10", "1", "1", "1", "1"}, "-ERR syntax error\r\n"},
		{[]string{"LB.RESERVE", "api", "2000000000", "1"}, "-ERR rate is too high for period: less than 1 ns per unit\r\n"},
		{[]string{"LB.RESERVE", "api"}, "-ERR wrong number of arguments for 'lb.reserve' command\r\n"},
		{[]string{"LB.CANCEL", "api", "-1"}, "-ERR invalid cost '-1': must not be negative\r\n"},
		{[]string{"LB.CANCEL", "api", "1"}, "$-1\r\n"},
	} {
		if got := c.Do(t, tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := c.Do(t, "DBSIZE"); got != ":0\r\n" {
		t.Fatalf("bad input left state: DBSIZE %q", got)
	}
	c.Do(t, "SET", "str", "v")
	if got := c.Do(t, "LB.RESERVE", "str", "10", "1"); got != "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" {
		t.Fatalf("LB.RESERVE on a string: %q", got)
	}
	if got := c.Do(t, "LB.CANCEL", "str", "1"); got != "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" {
		t.Fatalf("LB.CANCEL on a string: %q", got)
	}
	if got := c.Do(t, "CL.THROTTLE", "api", "1", "1", "1"); got != "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n" {
		t.Fatalf("setup: %q", got)
	}
	if got := c.Do(t, "LB.RESERVE", "api", "10", "1"); got != "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" {
		t.Fatalf("LB.RESERVE on a GCRA key: %q", got)
	}

	// 10 per second, burst 2: two go now, the third after 100 ms; in
	// seconds the wait rounds up to 1.
	for i, want := range []string{"*4\r\n:1\r\n:0\r\n:0\r\n:100\r\n", "*4\r\n:1\r\n:0\r\n:0\r\n:200\r\n", "*4\r\n:1\r\n:100\r\n:0\r\n:300\r\n"} {
		if got := c.Do(t, "LB.RESERVE", "q", "10", "1", "2", "1", "MS"); got != want {
			t.Fatalf("reserve %d: %q, want %q", i, got, want)
		}
	}
	if got := c.Do(t, "LB.RESERVE", "q", "10", "1", "2"); got != "*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n" {
		t.Fatalf("reserve in seconds: %q", got)
	}
	if got := c.Do(t, "LB.RESERVE", "q", "10", "1", "2", "1", "MS", "MAXWAIT", "150"); got != "*4\r\n:0\r\n:300\r\n:2\r\n:400\r\n" {
		t.Fatalf("past MAXWAIT: %q", got)
	}
	if got := c.Do(t, "TYPE", "q"); got != "+leaky-bucket\r\n" {
		t.Fatalf("TYPE: %q", got)
	}
	if got := c.Do(t, "PTTL", "q"); got != ":400\r\n" {
		t.Fatalf("PTTL: %q", got)
	}
	if got := c.Do(t, "LIMIT.INFO", "q"); got != "*18\r\n$6\r\nfamily\r\n$12\r\nleaky-bucket\r\n$4\r\nrate\r\n:10\r\n$6\r\nperiod\r\n$1\r\n1\r\n$5\r\nburst\r\n:2\r\n$11\r\ninterval_ns\r\n:100000000\r\n$9\r\nscheduled\r\n:4\r\n$9\r\nremaining\r\n:0\r\n$11\r\nreset_at_ms\r\n"+c.Do(t, "PEXPIRETIME", "q")+"$14\r\nreset_after_ms\r\n:400\r\n" {
		t.Fatalf("LIMIT.INFO: %q", got)
	}
	// The period as given, decimal when it was; a rate too wide to keep
	// in the record's 16 bytes (past 2^31 - 1) leaves the interval alone.
	c.Do(t, "LB.RESERVE", "dec", "3", "1.5", "4")
	if got := c.Do(t, "LIMIT.INFO", "dec"); !strings.Contains(got, "$4\r\nrate\r\n:3\r\n$6\r\nperiod\r\n$3\r\n1.5\r\n$5\r\nburst\r\n:4\r\n$11\r\ninterval_ns\r\n:500000000\r\n") {
		t.Fatalf("LIMIT.INFO, decimal period: %q", got)
	}
	c.Do(t, "LB.RESERVE", "wide", "3000000000", "10")
	if got := c.Do(t, "LIMIT.INFO", "wide"); strings.Contains(got, "rate") || !strings.Contains(got, "$5\r\nburst\r\n:1\r\n$11\r\ninterval_ns\r\n:3\r\n") {
		t.Fatalf("LIMIT.INFO, rate too wide to keep: %q", got)
	}
	// LIMIT.REFUND gives back two units: the remaining burst is 0 still
	// (two units scheduled, a burst of 2); LB.CANCEL two more: idle.
	if got := c.Do(t, "LIMIT.REFUND", "q", "2"); got != ":0\r\n" {
		t.Fatalf("LIMIT.REFUND: %q", got)
	}
	if got := c.Do(t, "LB.CANCEL", "q", "2"); got != ":0\r\n" {
		t.Fatalf("LB.CANCEL: %q", got)
	}
	if got := c.Do(t, "EXISTS", "q"); got != ":0\r\n" {
		t.Fatalf("a cancelled schedule left its key: %q", got)
	}
	c.Do(t, "LB.RESERVE", "r", "10", "1", "1", "5")
	if got := c.Do(t, "LIMIT.RESET", "r"); got != ":1\r\n" {
		t.Fatalf("LIMIT.RESET: %q", got)
	}
}

// LB.RESERVE inside LIMIT.ALL: a request takes a rate slot and a place on
// a schedule all or nothing. MAXWAIT is what makes a reservation trip.
func TestLeakyBucketInLimitAll(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	sluicetest.FreezeClock(t, ts.Client)
	all := func(maxWait string) string {
		return c.Do(t, "LIMIT.ALL", "2", "CL.THROTTLE", "user", "4", "10", "1", "1", "MS",
			"LB.RESERVE", "api", "10", "1", "1", "1", "MAXWAIT", maxWait, "MS")
	}
	// 10 per second, burst 1: the first goes now, the second would wait
	// 100 ms.
	if got := all("50"); got != "*3\r\n:0\r\n:-1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:100\r\n*4\r\n:1\r\n:0\r\n:0\r\n:100\r\n" {
		t.Fatalf("first: %q", got)
	}
	// The schedule trips: nothing is charged, on either key.
	if got := all("50"); got != "*3\r\n:1\r\n:1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:3\r\n:-1\r\n:200\r\n*4\r\n:0\r\n:100\r\n:0\r\n:100\r\n" {
		t.Fatalf("a wait past MAXWAIT: %q", got)
	}
	if got := c.Do(t, "CL.THROTTLE", "user", "4", "10", "1", "0"); got != "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:1\r\n" {
		t.Fatalf("the refused LIMIT.ALL charged the GCRA key: %q", got)
	}
	// With room to wait, both are taken.
	if got := all("150"); got != "*3\r\n:0\r\n:-1\r\n*2\r\n*5\r\n:0\r\n:5\r\n:3\r\n:-1\r\n:200\r\n*4\r\n:1\r\n:100\r\n:0\r\n:200\r\n" {
		t.Fatalf("within MAXWAIT: %q", got)
	}
	if got := c.Do(t, "INFO", "stats"); !strings.Contains(got, "decisions_limited:1\r\n") {
		t.Fatalf("INFO stats: %q", got)
	}
}

// A reservation sent with REQID is made once: its retry gets the first
// answer and takes no second slot.
func TestLeakyBucketReqID(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	sluicetest.FreezeClock(t, ts.Client)
	first := c.Do(t, "LB.RESERVE", "k", "10", "1", "1", "1", "MS", "REQID", "a")
	if again := c.Do(t, "LB.RESERVE", "k", "10", "1", "1", "1", "MS", "REQID", "a"); again != first || first != "*4\r\n:1\r\n:0\r\n:0\r\n:100\r\n" {
		t.Fatalf("a reservation and its retry: %q then %q", first, again)
	}
	if got := c.Do(t, "LB.RESERVE", "k", "10", "1", "1", "1", "MS", "REQID", "b"); got != "*4\r\n:1\r\n:100\r\n:0\r\n:200\r\n" {
		t.Fatalf("the next request: %q, want the second slot", got)
	}
}
