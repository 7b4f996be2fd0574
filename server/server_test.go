package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/internal/vectors"
	"github.com/sluicehq/sluice/server"
)

var ctx = context.Background()

// TestVectorsOverTheWire replays the shared CL.THROTTLE vectors through a
// real server, moving its clock with DEBUG CLOCK.
func TestVectorsOverTheWire(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	rows, err := vectors.ThrottleRows()
	if err != nil {
		t.Fatalf("the CL.THROTTLE vectors must parse: %v", err)
	}
	base := sluicetest.FreezeClock(t, ts.Client)
	for _, row := range rows {
		ts.Expect(t, "OK", "DEBUG", "CLOCK", "SET", base+row.TMs)
		args := []any{"CL.THROTTLE", row.Key}
		for _, a := range row.Args {
			args = append(args, a)
		}
		var want []any
		for _, w := range row.Want {
			want = append(want, w)
		}
		ts.Expect(t, want, args...)
	}
	if len(rows) < 30 {
		t.Fatalf("only %d vector rows replayed", len(rows))
	}
}

func TestTranscript(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	base := sluicetest.FreezeClock(t, ts.Client)
	now := base + 1500 // after the two DEBUG CLOCK ADVANCEs below
	steps := []struct {
		args []any
		want any
	}{
		{[]any{"PING"}, "PONG"},
		{[]any{"PING", "hi"}, "hi"},
		{[]any{"ECHO", "x y"}, "x y"},
		{[]any{"SELECT", "0"}, "OK"},
		{[]any{"SELECT", "1"}, errors.New("ERR DB index is out of range")},
		{[]any{"SET", "s", "10"}, "OK"},
		{[]any{"GET", "s"}, "10"},
		{[]any{"INCR", "s"}, int64(11)},
		{[]any{"INCRBY", "s", "-20"}, int64(-9)},
		{[]any{"DECR", "s"}, int64(-10)},
		{[]any{"DECRBY", "s", "5"}, int64(-15)},
		{[]any{"SET", "s", "x", "GET"}, "-15"},
		{[]any{"INCR", "s"}, errors.New("ERR value is not an integer or out of range")},
		{[]any{"SET", "n", "9223372036854775807"}, "OK"},
		{[]any{"INCR", "n"}, errors.New("ERR increment or decrement would overflow")},
		{[]any{"SET", "s", "y", "NX"}, nil},
		{[]any{"SET", "new", "y", "XX"}, nil},
		{[]any{"SET", "e", "v", "PX", "1500"}, "OK"},
		{[]any{"PTTL", "e"}, int64(1500)},
		{[]any{"TTL", "e"}, int64(2)},
		{[]any{"DEBUG", "CLOCK", "ADVANCE", "1499"}, "OK"},
		{[]any{"PTTL", "e"}, int64(1)},
		{[]any{"DEBUG", "CLOCK", "ADVANCE", "1"}, "OK"},
		{[]any{"GET", "e"}, nil},
		{[]any{"EXISTS", "e"}, int64(0)},
		{[]any{"SET", "e", "v"}, "OK"},
		{[]any{"TTL", "e"}, int64(-1)},
		{[]any{"EXPIRE", "e", "100"}, int64(1)},
		{[]any{"EXPIRE", "e", "50", "GT"}, int64(0)},
		{[]any{"TTL", "e"}, int64(100)},
		{[]any{"PERSIST", "e"}, int64(1)},
		{[]any{"TTL", "missing"}, int64(-2)},
		{[]any{"CL.THROTTLE", "g", "4", "1", "10", "1"}, sluicetest.Ints(0, 5, 4, -1, 10)},
		{[]any{"CL.THROTTLE", "g", "4", "1", "10", "1", "MS"}, sluicetest.Ints(0, 5, 3, -1, 20000)},
		{[]any{"CL.THROTTLE", "g", "4", "1", "10", "0"}, sluicetest.Ints(0, 5, 3, -1, 20)},
		{[]any{"TYPE", "g"}, "gcra"},
		{[]any{"TTL", "g"}, int64(20)},
		{[]any{"PTTL", "g"}, int64(20000)},
		{[]any{"GET", "g"}, errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")},
		{[]any{"SW.CHECK", "g", "10", "60"}, errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")},
		{[]any{"EXPIRE", "g", "5"}, errors.New("ERR a rate limiter key expires at its reset time; use LIMIT.RESET to forget it")},
		{[]any{"LIMIT.REFUND", "g", "1"}, int64(4)},
		{[]any{"LIMIT.REFUND", "g", "100"}, int64(5)},
		{[]any{"EXISTS", "g"}, int64(0)},
		{[]any{"LIMIT.REFUND", "g", "1"}, nil},
		{[]any{"SW.CHECK", "w", "10", "60", "4"}, sluicetest.Ints(0, 10, 6, -1, roundedSeconds(120000-now%60000))},
		{[]any{"TYPE", "w"}, "sliding-window"},
		{[]any{"FW.CHECK", "f", "3", "1", "3", "MS"}, sluicetest.Ints(0, 3, 0, -1, 1000-now%1000)},
		{[]any{"FW.CHECK", "f", "3", "1", "1", "MS"}, sluicetest.Ints(1, 3, 0, 1000-now%1000, 1000-now%1000)},
		{[]any{"SL.CHECK", "l", "2", "10", "2"}, sluicetest.Ints(0, 2, 0, -1, 10)},
		{[]any{"SL.CHECK", "l", "2", "10", "3"}, sluicetest.Ints(1, 2, 0, -1, 10)},
		{[]any{"TYPE", "l"}, "sliding-log"},
		{[]any{"LIMIT.RESET", "l", "f", "s", "nokey"}, int64(2)},
		{[]any{"EXISTS", "l", "f", "s"}, int64(1)},
		{[]any{"DEL", "s", "w", "nokey"}, int64(2)},
		{[]any{"MGET", "n", "g", "nokey"}, []any{"9223372036854775807", nil, nil}},
		{[]any{"DBSIZE"}, int64(2)},
		{[]any{"FLUSHALL"}, "OK"},
		{[]any{"DBSIZE"}, int64(0)},
		{[]any{"TIME"}, []any{strconv.FormatInt(now/1000, 10), strconv.FormatInt(now%1000*1000, 10)}},
	}
	for _, s := range steps {
		ts.Expect(t, s.want, s.args...)
	}
}

func TestLimitInfoAndAll(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	base := sluicetest.FreezeClock(t, ts.Client)
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "a", "4", "1", "10")
	ts.Expect(t, []any{"family", "gcra", "max_burst", int64(4), "count", int64(1), "period", "10", "limit", int64(5), "emission_interval_ns", int64(10e9),
		"remaining", int64(4), "reset_at_ms", base + 10000, "reset_after_ms", int64(10000)}, "LIMIT.INFO", "a")
	// The parameters as written, a decimal period too.
	ts.Expect(t, sluicetest.Ints(0, 4, 3, -1, 1), "CL.THROTTLE", "dec", "3", "30", "1.5")
	ts.Expect(t, []any{"family", "gcra", "max_burst", int64(3), "count", int64(30), "period", "1.5", "limit", int64(4), "emission_interval_ns", int64(50e6),
		"remaining", int64(3), "reset_at_ms", base + 50, "reset_after_ms", int64(50)}, "LIMIT.INFO", "dec")
	ts.Expect(t, nil, "LIMIT.INFO", "nokey")

	// Both pass: both consume.
	ts.Expect(t, []any{int64(0), int64(-1), []any{sluicetest.Ints(0, 5, 3, -1, 20), sluicetest.Ints(0, 2, 1, -1, 60)}},
		"LIMIT.ALL", "2", "CL.THROTTLE", "a", "4", "1", "10", "1", "SL.CHECK", "b", "2", "60", "1")
	// The second trips: it reports its own state, the first what it would
	// have been, and nothing is consumed.
	ts.Expect(t, []any{int64(1), int64(1), []any{sluicetest.Ints(0, 5, 2, -1, 30), sluicetest.Ints(1, 2, 1, 60, 60)}},
		"LIMIT.ALL", "2", "CL.THROTTLE", "a", "4", "1", "10", "1", "SL.CHECK", "b", "2", "60", "2")
	ts.Expect(t, sluicetest.Ints(0, 5, 3, -1, 20), "CL.THROTTLE", "a", "4", "1", "10", "0")
	ts.Expect(t, sluicetest.Ints(0, 2, 1, -1, 60), "SL.CHECK", "b", "2", "60", "0")
	ts.Expect(t, errors.New("ERR LIMIT.ALL names the same key twice; combine the costs into one limit"),
		"LIMIT.ALL", "2", "CL.THROTTLE", "a", "4", "1", "10", "1", "CL.THROTTLE", "a", "4", "1", "10", "1")
	ts.Expect(t, errors.New("ERR invalid numlimits '3': does not match the number of limits that follow"),
		"LIMIT.ALL", "3", "CL.THROTTLE", "a", "4", "1", "10", "1", "SL.CHECK", "b", "2", "60", "2")
	ts.Expect(t, errors.New("ERR invalid limit 'GET': is not a decision command (CL.THROTTLE, SW.CHECK, SL.CHECK, FW.CHECK, LB.RESERVE, CONC.ACQUIRE)"),
		"LIMIT.ALL", "1", "GET", "a", "1", "2", "3", "4")
	ts.Expect(t, errors.New("ERR invalid limit 'LIMIT.ALL': is not a decision command (CL.THROTTLE, SW.CHECK, SL.CHECK, FW.CHECK, LB.RESERVE, CONC.ACQUIRE)"),
		"LIMIT.ALL", "1", "LIMIT.ALL", "1", "CL.THROTTLE", "a", "4", "1")
	ts.Expect(t, sluicetest.Ints(0, 5, 3, -1, 20), "CL.THROTTLE", "a", "4", "1", "10", "0")
}

// TestBadInputChangesNothing sends malformed commands and checks each gets
// a clear error and the state stays as it was.
func TestBadInputChangesNothing(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	sluicetest.FreezeClock(t, ts.Client)
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "k", "4", "1", "10")
	ts.Expect(t, "OK", "SET", "str", "v")
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"CL.THROTTLE", "k"}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", "x", "1", "10"}, "ERR invalid max_burst 'x': value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", "-1", "1", "10"}, "ERR invalid max_burst '-1': must not be negative"},
		{[]any{"CL.THROTTLE", "k", "4", "0", "10"}, "ERR invalid count '0': must be positive"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "0"}, "ERR invalid period '0': must be positive"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "-5"}, "ERR invalid period '-5': must not be negative"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "abc"}, "ERR invalid period 'abc': is not a valid number of seconds"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "10", "-1"}, "ERR invalid quantity '-1': must not be negative"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "10", "99999999999999999999"}, "ERR invalid quantity '99999999999999999999': value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", "9223372036854775807", "1", "10"}, "ERR max_burst is too large for this rate: (max_burst+1)*period/count exceeds 2^61 ns (73 years)"},
		{[]any{"CL.THROTTLE", "k", "4", "1", "10", "1", "2"}, "ERR syntax error"},
		{[]any{"SW.CHECK", "k2", "0", "10"}, "ERR invalid limit '0': must be positive"},
		{[]any{"SW.CHECK", "k2", "10", "1e3"}, "ERR invalid window '1e3': is not a valid number of seconds"},
		{[]any{"SL.CHECK", "k2", "1000000", "10"}, "ERR invalid limit '1000000': is too large for a sliding log (at most 65000)"},
		{[]any{"SL.CHECK", strings.Repeat("k", 20000), "65000", "10"}, "ERR sliding log limit too large for this key: one 16-byte entry per unit plus the key must fit in 1 MiB"},
		{[]any{"LIMIT.REFUND", "k", "-1"}, "ERR invalid amount '-1': must not be negative"},
		{[]any{"LIMIT.REFUND", "k", "1.5"}, "ERR invalid amount '1.5': value is not an integer or out of range"},
		{[]any{"SW.CHECK", "str", "10", "10"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"NOSUCH", "a"}, "ERR unknown command 'NOSUCH', with args beginning with: 'a' "},
		{[]any{"CLIENT", "NOSUCH"}, "ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP."},
		{[]any{"SET", "str", "v", "EX", "0"}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "str", "v", "EX", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "str", "v", "NX", "XX"}, "ERR syntax error"},
		{[]any{"DEBUG", "CLOCK", "SET", "1"}, "ERR the clock cannot go backwards"},
		{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
	}
	for _, c := range cases {
		ts.Expect(t, errors.New(c.want), c.args...)
	}
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "k", "4", "1", "10", "0")
	ts.Expect(t, "v", "GET", "str")
	ts.Expect(t, int64(2), "DBSIZE")
}

func TestAuth(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{RequirePass: "s3cret"}, Engine: engine.Config{}})
	ts.Expect(t, "PONG", "PING") // go-redis authenticated with the password
	raw := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2, MaxRetries: -1})
	defer raw.Close()
	for _, args := range [][]any{{"PING"}, {"GET", "a"}, {"CL.THROTTLE", "a", "1", "1", "1"}} {
		if err := raw.Do(ctx, args...).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
			t.Fatalf("%v before AUTH: %v", args, err)
		}
	}
	if err := raw.Do(ctx, "AUTH", "wrong").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password: %v", err)
	}
	// A pool connection is fresh per call; authenticate one conn explicitly.
	conn := raw.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "AUTH", "default", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := conn.Do(ctx, "PING").Result(); err != nil || v != "PONG" {
		t.Fatalf("after AUTH: %v %v", v, err)
	}
	h, err := conn.Do(ctx, "HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "me").Result()
	if err != nil || !reflect.DeepEqual(h.([]any)[:2], []any{"server", "sluice"}) {
		t.Fatalf("HELLO: %v %v", h, err)
	}
	if name, _ := conn.Do(ctx, "CLIENT", "GETNAME").Result(); name != "me" {
		t.Fatalf("HELLO SETNAME: %v", name)
	}
}

func TestMaxMemoryRefusesNewStateOnly(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{Shards: 4}})
	ts.Expect(t, sluicetest.Ints(0, 5, 4, -1, 10), "CL.THROTTLE", "old", "4", "1", "10")
	ts.Expect(t, "OK", "CONFIG", "SET", "maxmemory", "1")
	oom := errors.New("OOM command not allowed when used memory > 'maxmemory'.")
	ts.Expect(t, oom, "CL.THROTTLE", "new", "4", "1", "10")
	ts.Expect(t, oom, "SET", "x", "1")
	ts.Expect(t, oom, "LIMIT.ALL", "2", "CL.THROTTLE", "old", "4", "1", "10", "1", "CL.THROTTLE", "new2", "4", "1", "10", "1")
	// Existing state keeps working, and was not charged by the refused LIMIT.ALL.
	if v := ts.Do(t, "CL.THROTTLE", "old", "4", "1", "10").([]any); v[2] != int64(3) {
		t.Fatalf("existing key after OOM: %v", v)
	}
	ts.Expect(t, int64(0), "EXISTS", "new", "x", "new2")
	ts.Expect(t, "OK", "CONFIG", "SET", "maxmemory", "0")
	ts.Expect(t, "OK", "SET", "x", "1")
}

// TestExactlyOnceUnderConcurrency: 64 connections hammer one key with
// 10,000 requests; exactly the limit is admitted.
func TestExactlyOnceUnderConcurrency(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	for _, c := range []struct {
		name string
		args []any
	}{
		{"cl.throttle", []any{"CL.THROTTLE", "hot", "99", "1", "3600"}},
		{"sw.check", []any{"SW.CHECK", "hot2", "100", "3600"}},
		{"sl.check", []any{"SL.CHECK", "hot3", "100", "3600"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var allowed, errs atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 64; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := w; i < 10000; i += 64 {
						v, err := ts.Client.Do(ctx, c.args...).Result()
						if err != nil {
							errs.Add(1)
							continue
						}
						if v.([]any)[0] == int64(0) {
							allowed.Add(1)
						}
					}
				}(w)
			}
			wg.Wait()
			if errs.Load() != 0 || allowed.Load() != 100 {
				t.Fatalf("allowed %d (errors %d), want exactly 100", allowed.Load(), errs.Load())
			}
		})
	}
}

// TestSweeperNeverChangesAnswers replays one random workload against a
// server that sweeps after every batch and one that never sweeps.
func TestSweeperNeverChangesAnswers(t *testing.T) {
	eager := sluicetest.Start(t, sluicetest.Options{Server: server.Config{SweepInterval: time.Millisecond}, Engine: engine.Config{Shards: 4, SweepEveryBatch: true, SweepBudget: 1 << 16}})
	never := sluicetest.Start(t, sluicetest.Options{Server: server.Config{SweepInterval: -1}, Engine: engine.Config{Shards: 4}})
	base := max(sluicetest.FreezeClock(t, eager.Client), sluicetest.FreezeClock(t, never.Client)) + 1000
	eager.Expect(t, "OK", "DEBUG", "CLOCK", "SET", base)
	never.Expect(t, "OK", "DEBUG", "CLOCK", "SET", base)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 4000; i++ {
		key := "k" + strconv.Itoa(rng.IntN(50))
		var args []any
		switch rng.IntN(7) {
		case 0:
			args = []any{"CL.THROTTLE", "g" + key, "3", "2", "1", strconv.Itoa(rng.IntN(3))}
		case 1:
			args = []any{"SW.CHECK", "w" + key, "5", "0.5", strconv.Itoa(rng.IntN(3)), "MS"}
		case 2:
			args = []any{"SL.CHECK", "l" + key, "4", "0.3", "1", "MS"}
		case 3:
			args = []any{"FW.CHECK", "f" + key, "4", "0.2", "1", "MS"}
		case 4:
			args = []any{"SET", "s" + key, "v", "PX", strconv.Itoa(1 + rng.IntN(300))}
		case 5:
			args = []any{"DEBUG", "CLOCK", "ADVANCE", strconv.Itoa(rng.IntN(120))}
		case 6:
			args = []any{"PTTL", []string{"g", "w", "l", "f", "s"}[rng.IntN(5)] + key}
		}
		a, errA := eager.Client.Do(ctx, args...).Result()
		b, errB := never.Client.Do(ctx, args...).Result()
		if fmt.Sprint(a, errA) != fmt.Sprint(b, errB) {
			t.Fatalf("step %d %v: eager sweeper %v %v, no sweeper %v %v", i, args, a, errA, b, errB)
		}
	}
	if st := eager.Engine.Stats(); st.Swept == 0 {
		t.Fatalf("the eager sweeper freed nothing; the test proves nothing")
	}
}

func TestLongPipeline(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	pipe := ts.Client.Pipeline()
	const n = 100000
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "CL.THROTTLE", "p"+strconv.Itoa(i%1000), "99", "1", "3600")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		// Key i%1000 has seen i/1000 earlier requests.
		if got, want := v.([]any)[2], int64(99-i/1000); got != want {
			t.Fatalf("command %d: remaining %v, want %v", i, got, want)
		}
	}
}

// rawConn talks RESP by hand for protocol-level cases go-redis cannot send.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestProtocolEdges(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	t.Run("inline commands", func(t *testing.T) {
		c, r := rawConn(t, ts.Addr)
		io.WriteString(c, "PING\r\nSET inline \"a b\"\r\nGET inline\r\n")
		for _, want := range []string{"+PONG\r\n", "+OK\r\n", "$3\r\n", "a b\r\n"} {
			if line, _ := r.ReadString('\n'); line != want {
				t.Fatalf("got %q, want %q", line, want)
			}
		}
	})
	t.Run("binary keys", func(t *testing.T) {
		key := string([]byte{0, 1, '\r', '\n', 0xff, ' '})
		ts.Expect(t, sluicetest.Ints(0, 2, 1, -1, 1), "CL.THROTTLE", key, "1", "1", "1")
		ts.Expect(t, "gcra", "TYPE", key)
	})
	for _, c := range []struct{ name, send, want string }{
		{"absurd bulk length", "*2\r\n$3\r\nGET\r\n$9223372036854775807\r\nx\r\n", "-ERR Protocol error"},
		{"negative bulk length", "*2\r\n$3\r\nGET\r\n$-5\r\nabcdefgh\r\n", "-ERR Protocol error"},
		{"bad multibulk", "*x\r\n", "-ERR Protocol error"},
		{"dollar first", "$3\r\nfoo\r\n", "-ERR Protocol error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, r := rawConn(t, ts.Addr)
			io.WriteString(conn, c.send)
			line, _ := r.ReadString('\n')
			if !strings.HasPrefix(line, c.want) {
				t.Fatalf("got %q, want prefix %q", line, c.want)
			}
		})
	}
	t.Run("claimed 512MB bulk then hang up", func(t *testing.T) {
		conn, _ := rawConn(t, ts.Addr)
		io.WriteString(conn, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nabc")
		conn.Close()
	})
	t.Run("disconnect mid-pipeline", func(t *testing.T) {
		conn, _ := rawConn(t, ts.Addr)
		var b strings.Builder
		for i := 0; i < 2000; i++ {
			b.WriteString("*6\r\n$11\r\nCL.THROTTLE\r\n$3\r\nmid\r\n$4\r\n9999\r\n$1\r\n1\r\n$4\r\n3600\r\n$1\r\n1\r\n")
		}
		io.WriteString(conn, b.String()[:b.Len()-7])
		conn.Close()
	})
	// The server is unharmed and every full command sent before the hang
	// up either ran or did not, exactly once.
	ts.Expect(t, "PONG", "PING")
	v := ts.Do(t, "CL.THROTTLE", "mid", "9999", "1", "3600", "0").([]any)
	if used := 10000 - v[2].(int64); used > 1999 {
		t.Fatalf("mid-pipeline hang up charged %d, more than the 1999 full commands sent", used)
	}
}

func TestDebugIsGated(t *testing.T) {
	for _, mode := range []server.DebugMode{server.DebugNo, server.DebugLocal} {
		eng := engine.New(engine.Config{})
		srv := server.New(server.Config{EnableDebug: mode}, eng)
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		go srv.Serve(ln)
		rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2})
		err := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Err()
		if mode == server.DebugNo && (err == nil || !strings.HasPrefix(err.Error(), "ERR DEBUG command not allowed")) {
			t.Fatalf("DEBUG with enable-debug-command no: %v", err)
		}
		if mode == server.DebugLocal && err != nil {
			t.Fatalf("DEBUG from loopback with enable-debug-command local: %v", err)
		}
		rdb.Close()
		srv.Close()
		eng.Close()
	}
}

func TestCommandIntrospection(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	n := ts.Do(t, "COMMAND", "COUNT").(int64)
	if n < 40 {
		t.Fatalf("COMMAND COUNT = %d", n)
	}
	info, err := ts.Client.Command(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ci := info["cl.throttle"]; ci == nil || ci.Arity != -5 || ci.FirstKeyPos != 1 || !contains(ci.Flags, "write") || !contains(ci.Flags, "denyoom") {
		t.Fatalf("COMMAND INFO cl.throttle: %+v", info["cl.throttle"])
	}
	if ci := info["limit.info"]; ci == nil || !ci.ReadOnly {
		t.Fatalf("COMMAND INFO limit.info: %+v", info["limit.info"])
	}
	if len(info) != int(n) {
		t.Fatalf("COMMAND: %d entries, COMMAND COUNT %d", len(info), n)
	}
	docs := ts.Do(t, "COMMAND", "DOCS", "sw.check").([]any)
	if docs[0] != "sw.check" || !strings.Contains(fmt.Sprint(docs[1]), "Sliding window") {
		t.Fatalf("COMMAND DOCS: %v", docs)
	}
	infoText := ts.Do(t, "INFO").(string)
	for _, want := range []string{"# Server", "# Clients", "# Memory", "# Stats", "# Keyspace", "used_memory:", "decisions_allowed:"} {
		if !strings.Contains(infoText, want) {
			t.Fatalf("INFO lacks %q", want)
		}
	}
}

// roundedSeconds rounds ms the way CL.THROTTLE replies do.
func roundedSeconds(ms int64) int64 {
	if ms%1000 > 0 {
		return ms/1000 + 1
	}
	return ms / 1000
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestScanVisitsEveryKey(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{Shards: 4}})
	want := map[string]bool{}
	for i := 0; i < 500; i++ {
		k := "scan:" + strconv.Itoa(i)
		want[k] = true
		ts.Do(t, "SW.CHECK", k, "10", "60")
	}
	ts.Do(t, "SET", "other", "1")
	seen := map[string]int{}
	var cursor uint64
	for {
		keys, next, err := ts.Client.Scan(ctx, cursor, "scan:*", 50).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k]++
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("SCAN saw %d keys, want %d", len(seen), len(want))
	}
	for k, n := range seen {
		if !want[k] || n != 1 {
			t.Fatalf("SCAN: %s seen %d times", k, n)
		}
	}
	keys := ts.Do(t, "KEYS", "scan:1*").([]any)
	if len(keys) != 111 {
		t.Fatalf("KEYS scan:1* = %d keys, want 111", len(keys))
	}
	typed, _, err := ts.Client.ScanType(ctx, 0, "*", 1000, "string").Result()
	if err != nil || len(typed) > 1 {
		t.Fatalf("SCAN TYPE string: %v %v", typed, err)
	}
}

func TestGracefulClose(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{}, Engine: engine.Config{}})
	ts.Expect(t, "PONG", "PING")
	done := make(chan struct{})
	go func() {
		ts.Server.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with an idle client connected")
	}
	if err := ts.Client.Do(ctx, "PING").Err(); err == nil {
		t.Fatal("PING after Close succeeded")
	}
}
