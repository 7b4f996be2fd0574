package server_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// decisionsMade is INFO's decisions_allowed plus decisions_limited.
func decisionsMade(t *testing.T, ts *sluicetest.Server) int64 {
	t.Helper()
	info := ts.Do(t, "INFO", "stats").(string)
	var n int64
	for _, f := range []string{"decisions_allowed:", "decisions_limited:"} {
		_, rest, _ := strings.Cut(info, f)
		v, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\r\n", 2)[0]), 10, 64)
		if err != nil {
			t.Fatalf("INFO stats %s: %v", f, err)
		}
		n += v
	}
	return n
}

// A client that sends decisions, hangs up before reading the replies (a
// reset, as a crashed or timed-out client leaves), and sends them again on
// a new connection: with REQID each is charged once, and the retry's reply
// is the first one; without, each is charged twice. Both cases wait until
// the server has decided the first sends, so the lost replies were real.
func TestRetryAfterALostReplyChargesOnce(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	const n = 40
	for _, withID := range []bool{true, false} {
		decision := func(i int) []string {
			args := []string{"CL.THROTTLE", fmt.Sprintf("retry:%v:%d", withID, i), "99", "1", "3600", "1"}
			if withID {
				args = append(args, "REQID", fmt.Sprintf("req-%d", i))
			}
			return args
		}
		before := decisionsMade(t, ts)
		c, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		var pipeline []byte
		for i := range n {
			pipeline = append(pipeline, sluicetest.EncodeCommand(decision(i)...)...)
		}
		if _, err := c.Write(pipeline); err != nil {
			t.Fatal(err)
		}
		sluicetest.WaitFor(t, 10*time.Second, "the first sends decided", func() bool { return decisionsMade(t, ts) >= before+n })
		c.(*net.TCPConn).SetLinger(0) // a reset: the replies are never read
		c.Close()

		retry := sluicetest.DialRaw(t, "tcp", ts.Addr)
		for i := range n {
			got := retry.Do(t, decision(i)...)
			remaining := 99
			if withID {
				// The first reply again: 100 units, 99 left after the one.
				if want := "*5\r\n:0\r\n:100\r\n:99\r\n:-1\r\n:3600\r\n"; got != want {
					t.Fatalf("retry %d: %q, want the first reply %q", i, got, want)
				}
			} else {
				remaining = 98
			}
			info := retry.Do(t, "LIMIT.INFO", decision(i)[1])
			if !strings.Contains(info, "$9\r\nremaining\r\n:"+strconv.Itoa(remaining)+"\r\n") {
				t.Fatalf("withID=%v key %d after a lost reply and a retry: %q, want remaining %d", withID, i, info, remaining)
			}
		}
	}
	if hits := ts.Do(t, "INFO", "stats").(string); !strings.Contains(hits, "reqid_retries_answered:40\r\n") {
		t.Fatalf("INFO stats: %q, want 40 retries answered from receipts", hits)
	}
}

// REQID's argument errors name what is wrong and change nothing.
func TestReqIDArguments(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CL.THROTTLE", "k", "1", "1", "60", "1", "REQID", ""}, "-ERR REQID id must be 1 to 64 bytes\r\n"},
		{[]string{"SW.CHECK", "k", "1", "60", "1", "REQID", strings.Repeat("x", 65)}, "-ERR REQID id must be 1 to 64 bytes\r\n"},
		{[]string{"LIMIT.ALL", "2", "FW.CHECK", "a", "1", "60", "1", "REQID", "x", "FW.CHECK", "b", "1", "60", "1"},
			"-ERR REQID must come after the last limit of LIMIT.ALL\r\n"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "60", "REQID", "x", "MS"}, "-ERR syntax error\r\n"},
		{[]string{"LIMIT.REFUND", "k", "1", "REQID", ""}, "-ERR REQID id must be 1 to 64 bytes\r\n"},
		{[]string{"LIMIT.REFUND", "k", "1", "REQID"}, "-ERR syntax error\r\n"},
		{[]string{"LIMIT.REFUND", "k", "1", "2"}, "-ERR syntax error\r\n"},
		{[]string{"CONFIG", "SET", "reqid-window", "0"},
			"-ERR CONFIG SET failed (possibly related to argument 'reqid-window') - argument must be a number of seconds from 1 to 3600\r\n"},
	} {
		if got := c.Do(t, tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := c.Do(t, "DBSIZE"); got != ":0\r\n" {
		t.Fatalf("bad REQIDs left state: DBSIZE %q", got)
	}
	// A refund with an id gives back once, however often it is retried.
	c.Do(t, "FW.CHECK", "rf", "10", "600", "6")
	for range 2 {
		if got := c.Do(t, "LIMIT.REFUND", "rf", "2", "REQID", "give-back"); got != ":6\r\n" {
			t.Fatalf("LIMIT.REFUND with REQID: %q, want 6 left every time", got)
		}
	}
	// MS and REQID together, in that order; the reply in milliseconds.
	if got := c.Do(t, "CL.THROTTLE", "k", "1", "1", "60", "1", "MS", "REQID", "x"); got != "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60000\r\n" {
		t.Fatalf("MS REQID: %q", got)
	}
	// A shorter window, then the id is forgotten after it.
	if got := c.Do(t, "CONFIG", "SET", "reqid-window", "1"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := c.Do(t, "CONFIG", "GET", "reqid-window"); got != "*2\r\n$12\r\nreqid-window\r\n$1\r\n1\r\n" {
		t.Fatal(got)
	}
	c.Do(t, "FW.CHECK", "w", "5", "600", "1", "REQID", "short")
	c.Do(t, "DEBUG", "CLOCK", "ADVANCE", "1001")
	if got := c.Do(t, "FW.CHECK", "w", "5", "600", "1", "REQID", "short"); !strings.HasPrefix(got, "*5\r\n:0\r\n:5\r\n:3\r\n") {
		t.Fatalf("the id after its window: %q, want a second charge (3 left)", got)
	}
}
