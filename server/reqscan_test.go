package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// rawExchange writes input on a fresh connection to network/addr, then
// reads until the server closes the connection or stays silent for
// 300 ms, and returns what came back.
func rawExchange(t *testing.T, network, addr string, input []byte) string {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(input); err != nil {
		t.Fatalf("write: %v", err)
	}
	var out []byte
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out)
		}
	}
}

// The protocol limits as Redis 7 applies them, before and after AUTH:
// the same bytes to redis-server (requirepass set) and to Sluice (the same
// password), replies compared byte for byte. Each case is one connection;
// the server answers the error and closes it.
func TestProtocolLimitsMatchRedis(t *testing.T) {
	const pass = "s3cret"
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{RequirePass: pass}})
	rd := sluicetest.StartRedis(t, "--requirepass", pass)
	auth := "*2\r\n$4\r\nAUTH\r\n$6\r\n" + pass + "\r\n"
	big := strings.Repeat("x", 70<<10)
	for _, tc := range []struct{ name, input string }{
		{"unauthenticated multibulk of 11", "*11\r\n"},
		{"unauthenticated multibulk of 10 is read", "*10\r\n$4\r\nPING\r\n"},
		{"unauthenticated bulk of 16385", "*2\r\n$3\r\nSET\r\n$16385\r\n"},
		{"unauthenticated bulk of 400 MB", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\n"},
		{"unauthenticated bulk of 16384 is read", "*1\r\n$16384\r\n"},
		{"multibulk count not a number", "*abc\r\n"},
		{"multibulk count too large", auth + "*2147483648\r\n"},
		{"bulk length negative", auth + "*1\r\n$-5\r\n"},
		{"bulk length not a number", auth + "*1\r\n$x\r\n"},
		{"bulk length past proto-max-bulk-len", auth + "*1\r\n$600000000\r\n"},
		{"no $ before a bulk", auth + "*1\r\n+PING\r\n"},
		{"inline request of 70 KiB", big},
		{"inline request of 70 KiB after AUTH", auth + big},
		{"multibulk count line of 70 KiB", "*" + big},
		{"bulk length line of 70 KiB", auth + "*1\r\n$" + big},
		{"unauthenticated command", "*1\r\n$4\r\nPING\r\n"},
		{"empty multibulk, then a command", auth + "*0\r\n*1\r\n$4\r\nPING\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := rawExchange(t, rd.Network, rd.Addr, []byte(tc.input))
			got := rawExchange(t, "tcp", ts.Addr, []byte(tc.input))
			if got != want {
				t.Fatalf("sluice %q\n redis %q", got, want)
			}
		})
	}
}

// An unauthenticated client's huge bulk is refused when its length is
// read: the reply comes before any of its bytes are sent, and the server
// does not wait for them.
func TestUnauthenticatedBulkRefusedAtItsLength(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{RequirePass: "pw"}})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	c.Conn().SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Conn().Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := sluicetest.ReadReply(bufio.NewReader(c.Conn()))
	if err != nil || string(reply) != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("%q %v", reply, err)
	}
}

// An authenticated SET of a 64 MiB value, past the largest value Sluice
// stores, is answered an error once its bytes have come, without holding
// them: the server's heap stays far below the value's size, and the
// connection goes on.
func TestLargeArgumentDroppedAsItArrives(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	const size = 64 << 20
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conn := c.Conn()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", size)
	chunk := bytes.Repeat([]byte("v"), 1<<20)
	var peak uint64
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if sent%(8<<20) == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	}
	if _, err := io.WriteString(conn, "\r\n*1\r\n$4\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for _, want := range []string{"-ERR value too large: a key plus its value may take at most 1 MiB\r\n", "+PONG\r\n"} {
		if got, err := sluicetest.ReadReply(r); err != nil || string(got) != want {
			t.Fatalf("%q %v, want %q", got, err, want)
		}
	}
	if got := c.Do(t, "EXISTS", "k"); got != ":0\r\n" {
		t.Fatalf("EXISTS k: %q", got)
	}
	if grew := int64(peak) - int64(before.HeapInuse); grew > size/4 {
		t.Fatalf("the heap grew by %d bytes while a %d-byte argument arrived", grew, size)
	}
}

// The scan finds the same request boundaries as the parser however the
// bytes are split across reads: a pipeline of random requests (multibulk
// and inline, with empty and binary arguments) fed in random pieces, each
// reply compared with the same pipeline sent whole to another server.
func TestRequestsSplitAnywhere(t *testing.T) {
	ts, ts2 := sluicetest.Start(t, sluicetest.Options{}), sluicetest.Start(t, sluicetest.Options{})
	r := rand.New(rand.NewPCG(7, 7))
	var pipe bytes.Buffer
	n := 0
	for i := range 300 {
		switch r.IntN(4) {
		case 0:
			fmt.Fprintf(&pipe, "PING\r\n")
		case 1:
			v := strings.Repeat("\r\n$*", r.IntN(50))
			fmt.Fprintf(&pipe, "*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\n%s\r\n", len(fmt.Sprint("k", i%7)), i%7, len(v), v)
		case 2:
			fmt.Fprintf(&pipe, "*2\r\n$3\r\nGET\r\n$%d\r\nk%d\r\n", len(fmt.Sprint("k", i%7)), i%7)
		default:
			fmt.Fprintf(&pipe, "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n")
		}
		n++
	}
	whole := readReplies(t, ts.Addr, pipe.Bytes(), n, func(c net.Conn, b []byte) { c.Write(b) })
	pieces := readReplies(t, ts2.Addr, pipe.Bytes(), n, func(c net.Conn, b []byte) {
		for len(b) > 0 {
			k := min(len(b), 1+r.IntN(9))
			c.Write(b[:k])
			b = b[k:]
			if r.IntN(20) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	if whole != pieces {
		t.Fatalf("whole and in pieces differ:\n%q\n%q", whole, pieces)
	}
}

func readReplies(t *testing.T, addr string, input []byte, n int, send func(net.Conn, []byte)) string {
	t.Helper()
	c := sluicetest.DialRaw(t, "tcp", addr)
	c.Conn().SetDeadline(time.Now().Add(30 * time.Second))
	go send(c.Conn(), input)
	r := bufio.NewReader(c.Conn())
	var out []byte
	for range n {
		reply, err := sluicetest.ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, reply...)
	}
	return string(out)
}

// A client that pipelines and never reads cannot hold a shutdown up: the
// server's blocked write gets the drain bound, then the connection is cut
// and Close returns (it waited for the client to leave before).
func TestCloseWithAClientThatNeverReads(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	ts.Do(t, "SET", "big", strings.Repeat("v", 512<<10))
	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A fixed receive buffer turns the kernel's autotuning off for it.
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	// 64 GETs of 512 KiB owe 32 MiB of replies, far past what the
	// sockets' buffers take (the server's send buffer is at most 4 MiB):
	// the server blocks writing them. (More would only test how fast a
	// starved, race-instrumented process copies values: 400 once took CI
	// more than 12 s.)
	go func() {
		get := []byte("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
		for range 64 {
			if _, err := c.Write(get); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the server is blocked in its write by now
	closed := make(chan struct{})
	go func() { ts.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(server.ShutdownDrain + 10*time.Second):
		t.Fatalf("Close still waiting %v after it began, for a client that never reads", server.ShutdownDrain+10*time.Second)
	}
}

// A pipeline of KEYS * over 10,000 keys is answered a few replies at a
// time: the server's heap stays near one batch's worth of replies, not
// the whole pipeline's (before: all 1,024 replies were built, then
// written; 3.4 GB resident for the reproduction with 1,024).
func TestPipelinedBigRepliesAreBounded(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	fill := sluicetest.DialRaw(t, "tcp", ts.Addr)
	args := []string{"MSET"}
	for i := range 10_000 {
		args = append(args, fmt.Sprintf("key:%05d", i), "v")
	}
	if got := fill.Do(t, args...); got != "+OK\r\n" {
		t.Fatal(got)
	}
	const n = 256
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	c.Conn().SetDeadline(time.Now().Add(60 * time.Second))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := c.Conn().Write(bytes.Repeat([]byte("*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n"), n)); err != nil {
		t.Fatal(err)
	}
	// A slow reader: the server writes as the client takes.
	r := bufio.NewReaderSize(c.Conn(), 64<<10)
	var peak uint64
	for i := range n {
		reply, err := sluicetest.ReadReply(r)
		if err != nil || !bytes.HasPrefix(reply, []byte("*10000\r\n")) {
			t.Fatalf("reply %d: %.40q %v", i, reply, err)
		}
		if i%16 == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Each KEYS reply is 10,000 items as the engine holds them (about
	// 1.7 MB) and 138 KB written; all 256 at once were 435 MB or more.
	grew := int64(peak) - int64(before.HeapInuse)
	if grew > 120<<20 {
		t.Fatalf("the heap grew by %d MB answering %d pipelined KEYS", grew>>20, n)
	}
	t.Logf("the heap grew by %d MB at most answering %d pipelined KEYS * over 10,000 keys", grew>>20, n)
}

// timeout counts from the last complete command: an idle connection and
// one that sends a byte at a time without finishing a request are both
// closed, so that slow senders cannot hold every slot of maxclients; a
// connection that keeps sending commands stays.
func TestIdleTimeoutFreesSlowlorisSlots(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{MaxClients: 4, Timeout: time.Second}})
	// A connection with a command every 300 ms all along.
	busy := sluicetest.DialRaw(t, "tcp", ts.Addr)
	busyErr := make(chan string, 1)
	busyStop, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		r := bufio.NewReader(busy.Conn())
		for {
			select {
			case <-busyStop:
				busyErr <- ""
				return
			case <-time.After(300 * time.Millisecond):
			}
			busy.Conn().SetDeadline(time.Now().Add(5 * time.Second))
			busy.Conn().Write([]byte("*1\r\n$4\r\nPING\r\n"))
			if reply, err := sluicetest.ReadReply(r); err != nil || string(reply) != "+PONG\r\n" {
				busyErr <- fmt.Sprintf("%q %v", reply, err)
				return
			}
		}
	}()
	var slow []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		slow = append(slow, c)
	}
	for _, c := range slow {
		go func() {
			// An endless request, a byte every 100 ms.
			c.Write([]byte("*2\r\n$3\r\nSET\r\n$1000000\r\n"))
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
	}
	start := time.Now()
	for _, c := range slow {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection sending a byte every 100 ms was not closed: %v", err)
		}
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("closed after %v, before the 1 s timeout", took)
	}
	// The freed slots take new clients, and the busy connection is there.
	if got := sluicetest.DialRaw(t, "tcp", ts.Addr).Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("a new client after the timeouts: %q", got)
	}
	time.Sleep(700 * time.Millisecond)
	close(busyStop)
	if e := <-busyErr; e != "" {
		t.Fatalf("the busy connection: %s", e)
	}
}

func TestConfigTimeoutAndKeepAlive(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	for _, step := range []struct{ cmd, want string }{
		{"CONFIG GET timeout", "*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"},
		{"CONFIG GET tcp-keepalive", "*2\r\n$13\r\ntcp-keepalive\r\n$3\r\n300\r\n"},
		{"CONFIG SET timeout 5", "+OK\r\n"},
		{"CONFIG GET timeout", "*2\r\n$7\r\ntimeout\r\n$1\r\n5\r\n"},
		{"CONFIG SET tcp-keepalive 0", "+OK\r\n"},
		{"CONFIG GET tcp-keepalive", "*2\r\n$13\r\ntcp-keepalive\r\n$1\r\n0\r\n"},
		{"CONFIG SET timeout -1", "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be a number of seconds, 0 or more\r\n"},
		{"CONFIG SET timeout 0", "+OK\r\n"},
	} {
		if got := c.Do(t, strings.Fields(step.cmd)...); got != step.want {
			t.Fatalf("%s: %q, want %q", step.cmd, got, step.want)
		}
	}
}
