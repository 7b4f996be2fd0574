package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// client-output-buffer-limit and client-query-buffer-limit, valid and
// invalid, set and read back on Sluice and on a real redis-server, replies
// compared byte for byte: the words, units, C integer quirks, error texts
// and what CONFIG GET reports after each.
func TestBufferLimitConfigMatchesRedis(t *testing.T) { protocols(t, testBufferLimitConfig) }

func testBufferLimitConfig(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	w.hello(resp3)
	const obuf, qbuf = "client-output-buffer-limit", "client-query-buffer-limit"
	w.same("CONFIG", "GET", obuf)
	w.same("CONFIG", "GET", qbuf)
	for _, v := range []string{
		"normal 1mb 0 0",
		"normal  1mb 0 0", // two spaces: an empty word
		"",                // nothing: no change
		"normal mb kb ",   // no digits is 0, and so is an empty soft-seconds
		"NORMAL 1MB 2Kb +3",
		"normal 1k 1K 0",
		"normal 1g 1gb 7",
		"normal 10b 0 0",
		"normal 1\x00junk 2 3", // C stops at the NUL
		"master 1 2 3",
		"foo 1 2 3",
		"normal -1 0 0",
		"normal 1 0 -1",
		"normal 1.5mb 0 0",
		"normal 0x10 0 0",
		"normal 1 1 1x",
		"normal 0 0 0\t",
		"normal 0 0 \t3",
		"normal 0 0  3",
		"normal 99999999999999999999 0 0",   // saturates
		"normal 18446744073709551615gb 0 0", // wraps
		"normal " + strings.Repeat("1", 127) + " 0 0",
		"normal " + strings.Repeat("1", 128) + " 0 0",
		"normal 0 0 4294967297", // an int: 1
		"normal 0 0 9223372036854775808",
		"normal 0 0 -9223372036854775809",
		"normal 1 2",
		"normal 1 1 1 pubsub 1 1",
		"normal 5 5 5 bad 1 1 1", // all or nothing
		"replica 1 2 3 pubsub 4 5 6",
		"slave 256mb 64mb 60 normal 1 2 3 pubsub 32mb 8mb 60 normal 4 5 6",
		"Replica 1 1 1 SLAVE 2 2 2 PubSub 3 3 3",
		"normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60",
	} {
		w.same("CONFIG", "SET", obuf, v)
		w.same("CONFIG", "GET", obuf)
		// Limits this low leave a connection owing a short reply alone
		// (Redis counts none of what its own 16 KiB buffer holds).
		w.same("PING")
	}
	for _, v := range []string{
		"1mb", "1048575", "1048576", "mb", "1gb", "2GB", "-1", "1.5mb", "9223372036854775807",
		"9223372036854775808", "99999999999999999999", "", "1 mb", "abc", "1k", "1048576b",
		"18446744073709551615gb", "2mb\x00x", "0", "+2mb", "1gb",
	} {
		w.same("CONFIG", "SET", qbuf, v)
		w.same("CONFIG", "GET", qbuf)
	}
}

// infoStat reads one INFO stats field.
func infoStat(t *testing.T, ts *sluicetest.Server, field string) string {
	t.Helper()
	info, err := ts.Client.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO stats has no %s:\n%s", field, info)
	return ""
}

// neverReader connects, takes little into its receive buffer, and sends n
// GETs of the key big in one write without reading any reply.
func neverReader(t *testing.T, ts *sluicetest.Server, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	sendGets(t, c, n, "")
	return c
}

// sendGets sends n GETs of the key big, then tail, in one write.
func sendGets(t *testing.T, c net.Conn, n int, tail string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", n) + tail)); err != nil {
		t.Fatal(err)
	}
}

// closedByServer reads whatever c was sent until the server closes it, and
// fails the test if it is still open after d.
func closedByServer(t *testing.T, c net.Conn, d time.Duration) int64 {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	n, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection is still open after %v (%d bytes read)", d, n)
	}
	return n
}

const bigValue = 512 << 10

// 32 GETs of 512 KiB owe 16 MiB, more than the sockets' buffers take: past a hard limit of 1 MiB at once, so
// the connection is closed without waiting for the client, while another
// is answered; INFO counts it, and a command after the GETs is not run.
// The connection was open before the limit was set.
func TestOutputBufferHardLimit(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	ts.Do(t, "SET", "big", strings.Repeat("v", bigValue))
	early := sluicetest.DialRaw(t, "tcp", ts.Addr)
	if got := early.Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	early.Conn().(*net.TCPConn).SetReadBuffer(64 << 10)
	ts.Do(t, "CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0")
	c := early.Conn()
	sendGets(t, c, 32, "*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$7\r\ntimeout\r\n$2\r\n77\r\n")
	sluicetest.WaitFor(t, 5*time.Second, "the output buffer limit to close the connection", func() bool {
		ts.Expect(t, "PONG", "PING") // another client is answered meanwhile
		return infoStat(t, ts, "client_output_buffer_limit_disconnections") == "1"
	})
	if n := closedByServer(t, c, 5*time.Second); n >= 32*bigValue {
		t.Fatalf("the client was sent all %d bytes", n)
	}
	ts.Expect(t, int64(bigValue), "STRLEN", "big")
	ts.Expect(t, []any{"timeout", "0"}, "CONFIG", "GET", "timeout")
	if got := infoStat(t, ts, "client_query_buffer_limit_disconnections"); got != "0" {
		t.Fatalf("client_query_buffer_limit_disconnections:%s", got)
	}
}

// Under a soft limit of 1 MiB for 1 s, a client that stops reading is
// closed when it has owed more than that for over a second (Redis's whole
// seconds: between 1 and 2 s), not before; another client is answered
// meanwhile. A client that reads its replies is not closed.
func TestOutputBufferSoftLimit(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	ts.Do(t, "SET", "big", strings.Repeat("v", bigValue))
	ts.Do(t, "CONFIG", "SET", "client-output-buffer-limit", "normal 0 1mb 1")

	reader := sluicetest.DialRaw(t, "tcp", ts.Addr)
	reader.Conn().SetDeadline(time.Now().Add(30 * time.Second))
	// 4 replies, 2 MiB: over the soft limit until the last two are
	// written, well under a second.
	if _, err := reader.Conn().Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 4))); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReaderSize(reader.Conn(), 64<<10)
	for i := range 4 {
		if reply, err := sluicetest.ReadReply(r); err != nil || len(reply) != bigValue+len("$524288\r\n\r\n") {
			t.Fatalf("reply %d to a client that reads: %d bytes, %v", i, len(reply), err)
		}
	}

	start := time.Now()
	c := neverReader(t, ts, 32)
	var closedAt time.Time
	sluicetest.WaitFor(t, 10*time.Second, "the soft output buffer limit to close the connection", func() bool {
		ts.Expect(t, "PONG", "PING")
		if infoStat(t, ts, "client_output_buffer_limit_disconnections") != "1" {
			return false
		}
		closedAt = time.Now()
		return true
	})
	if held := closedAt.Sub(start); held < time.Second {
		t.Fatalf("closed %v after the pipeline was sent: before the soft limit's second", held)
	}
	closedByServer(t, c, 5*time.Second)
	if got := reader.Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("the reading client after: %q", got)
	}
}

// With Redis's default for normal clients (0 0 0: no limit) a client that
// owes 16 MiB and reads nothing for 2.5 s is kept, and gets every reply when
// it reads.
func TestOutputBufferDefaultIsNoLimit(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	got, err := ts.Client.ConfigGet(context.Background(), "client-output-buffer-limit").Result()
	if want := "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"; err != nil || got["client-output-buffer-limit"] != want {
		t.Fatalf("CONFIG GET client-output-buffer-limit: %v, %v; want %q", got, err, want)
	}
	ts.Do(t, "SET", "big", strings.Repeat("v", bigValue))
	c := neverReader(t, ts, 32)
	time.Sleep(2500 * time.Millisecond)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReaderSize(c, 64<<10)
	for i := range 32 {
		if reply, err := sluicetest.ReadReply(r); err != nil || len(reply) != bigValue+len("$524288\r\n\r\n") {
			t.Fatalf("reply %d: %d bytes, %v", i, len(reply), err)
		}
	}
	if got := infoStat(t, ts, "client_output_buffer_limit_disconnections"); got != "0" {
		t.Fatalf("client_output_buffer_limit_disconnections:%s", got)
	}
}

// exchange writes input on a fresh connection (a write the server cuts
// short is no failure), then reads until the server closes the connection
// (closed) or stays silent for 300 ms, and returns what came back.
func exchange(t *testing.T, network, addr string, input []byte) (string, bool) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(input)
	}()
	var out []byte
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			ne, ok := err.(net.Error)
			return string(out), !ok || !ne.Timeout()
		}
	}
}

// setRequest is SET key value in RESP.
func setRequest(key string, size int) []byte {
	return fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, size, strings.Repeat("x", size))
}

// Under client-query-buffer-limit 1mb (Redis's least), a request of more
// than 1 MiB is not read whole: the connection is closed with no reply, as
// Redis closes it (the same bytes to redis-server), and counted; a request
// under the limit is served. A connection open before the limit was set
// has it from its next read.
func TestQueryBufferLimit(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	rd := sluicetest.StartRedis(t)
	early := sluicetest.DialRaw(t, "tcp", ts.Addr)
	if got := early.Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	ts.Do(t, "CONFIG", "SET", "client-query-buffer-limit", "1mb")
	rc := sluicetest.DialRaw(t, rd.Network, rd.Addr)
	if got := rc.Do(t, "CONFIG", "SET", "client-query-buffer-limit", "1mb"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	over := setRequest("k", 1<<20) // 1 MiB and its header
	want, redisClosed := exchange(t, rd.Network, rd.Addr, over)
	if got, closed := exchange(t, "tcp", ts.Addr, over); got != want || got != "" || !closed || !redisClosed {
		t.Fatalf("a request past the limit: sluice %q (closed %v), redis %q (closed %v)", got, closed, want, redisClosed)
	}
	if got := infoStat(t, ts, "client_query_buffer_limit_disconnections"); got != "1" {
		t.Fatalf("client_query_buffer_limit_disconnections:%s", got)
	}
	go early.Conn().Write(over)
	closedByServer(t, early.Conn(), 5*time.Second)
	if got := infoStat(t, ts, "client_query_buffer_limit_disconnections"); got != "2" {
		t.Fatalf("client_query_buffer_limit_disconnections:%s", got)
	}
	under := append(setRequest("k", 1000<<10), "*2\r\n$6\r\nSTRLEN\r\n$1\r\nk\r\n"...)
	want, redisClosed = exchange(t, rd.Network, rd.Addr, under)
	if got, closed := exchange(t, "tcp", ts.Addr, under); got != want || got != "+OK\r\n:1024000\r\n" || closed || redisClosed {
		t.Fatalf("a request under the limit: sluice %q (closed %v), redis %q (closed %v)", got, closed, want, redisClosed)
	}
	if got := infoStat(t, ts, "client_query_buffer_limit_disconnections"); got != "2" {
		t.Fatalf("client_query_buffer_limit_disconnections:%s", got)
	}
}

// The smaller of the two request bounds is in force: proto-max-bulk-len
// plus 64 KiB answers "too big request"; a smaller query buffer limit
// closes the connection silently.
func TestRequestBoundsSmallerWins(t *testing.T) {
	// Two values of 600 KiB: each is allowed, together they pass 1 MiB
	// plus 64 KiB.
	mset := fmt.Appendf(nil, "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$%d\r\n%s\r\n$1\r\nb\r\n$%d\r\n%s\r\n",
		600<<10, strings.Repeat("x", 600<<10), 600<<10, strings.Repeat("y", 600<<10))
	for _, tc := range []struct {
		name         string
		proto, limit int
		want         string
		closed       bool
	}{
		{"proto-max-bulk-len", 1 << 20, 0, "-ERR Protocol error: too big request\r\n", true},
		{"client-query-buffer-limit", 1 << 20, 1 << 20, "", true},
		{"neither", 0, 2 << 20, "+OK\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{ProtoMaxBulkLen: tc.proto, QueryBufferLimit: int64(tc.limit)}})
			if got, closed := exchange(t, "tcp", ts.Addr, mset); got != tc.want || closed != tc.closed {
				t.Fatalf("got %q (closed %v), want %q (closed %v)", got, closed, tc.want, tc.closed)
			}
			want := "0"
			if tc.want == "" {
				want = "1"
			}
			if got := infoStat(t, ts, "client_query_buffer_limit_disconnections"); got != want {
				t.Fatalf("client_query_buffer_limit_disconnections:%s, want %s", got, want)
			}
		})
	}
}

// loglevel, CONFIG REWRITE without a config file, and names CONFIG SET
// does not know, against a real redis-server: the same replies and errors.
func TestConfigSetAndRewriteMatchRedis(t *testing.T) { protocols(t, testConfigSetAndRewrite) }

func testConfigSetAndRewrite(t *testing.T, resp3 bool) {
	// The binary's loglevel, as cmd/sluice-server wires it.
	var level slog.LevelVar
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{OwnSettings: map[string]server.Setting{
		"loglevel": server.LogLevelSetting(&level),
	}}})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	w.hello(resp3)
	for _, v := range []string{"warning", "bogus", "DEBUG", "verbose", "", "notice"} {
		w.same("CONFIG", "SET", "loglevel", v)
		w.same("CONFIG", "GET", "loglevel")
	}
	w.same("CONFIG", "SET", "no-such-setting", "1")
	w.same("CONFIG", "SET", "NO-SUCH-SETTING", "1", "loglevel", "debug")
	w.same("CONFIG", "GET", "loglevel")
	// All or nothing: a refused value, a repeated name, an unknown or a
	// read-only one anywhere in the command leaves every setting as it was.
	w.same("CONFIG", "SET", "maxmemory", "10mb", "loglevel", "bogus")
	w.same("CONFIG", "SET", "loglevel", "debug", "maxmemory", "10mb", "LOGLEVEL", "warning")
	w.same("CONFIG", "SET", "maxmemory", "10mb", "no-such-setting", "1")
	w.same("CONFIG", "SET", "maxmemory", "10mb", "databases", "3")
	w.same("CONFIG", "SET", "databases", "3", "loglevel", "bogus")
	w.same("CONFIG", "GET", "maxmemory")
	w.same("CONFIG", "GET", "loglevel")
	w.same("CONFIG", "SET", "maxmemory", "10mb", "loglevel", "warning")
	w.same("CONFIG", "GET", "maxmemory")
	w.same("CONFIG", "GET", "loglevel")
	w.same("CONFIG", "SET", "maxmemory", "0")
	w.same("CONFIG", "REWRITE")
	w.same("CONFIG", "REWRITE", "extra")
}

// CONFIG RESETSTAT zeroes what Redis's resetServerStats does: the INFO
// stats counters read the same on both servers after it, counting the
// commands since.
func TestConfigResetStatMatchesRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	for range 3 {
		w.same("PING")
	}
	w.sluice.Do(t, "CL.THROTTLE", "k", "1", "1", "60")
	w.same("CONFIG", "RESETSTAT")
	w.same("PING")
	stat := func(info, name string) string {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return v
			}
		}
		t.Fatalf("INFO lacks %s:\n%s", name, info)
		return ""
	}
	got, want := w.both("INFO", "stats")
	for _, name := range []string{"total_connections_received", "total_commands_processed", "rejected_connections", "expired_keys"} {
		if g, r := stat(got, name), stat(want, name); g != r {
			t.Errorf("after CONFIG RESETSTAT, %s: sluice %s, redis %s", name, g, r)
		}
	}
	// Sluice's own counters are zeroed too.
	for _, name := range []string{"decisions_allowed", "client_output_buffer_limit_disconnections"} {
		if v := stat(got, name); v != "0" {
			t.Errorf("%s after CONFIG RESETSTAT: %s", name, v)
		}
	}
}
