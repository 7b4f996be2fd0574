package bench

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// chunkReader returns its data in reads of the sizes next() picks, to
// exercise replies split at every possible point.
type chunkReader struct {
	data []byte
	next func() int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.next(), len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// replyStream is a pipeline of replies of every shape with how each must be
// counted in a decision mode.
func replyStream() ([]byte, []outcome) {
	var b []byte
	var want []outcome
	add := func(o outcome, raw []byte) {
		b = append(b, raw...)
		want = append(want, o)
	}
	decision := func(limited int64, rest ...int64) []byte {
		out := redcon.AppendArray(nil, 1+len(rest))
		out = redcon.AppendInt(out, limited)
		for _, v := range rest {
			out = redcon.AppendInt(out, v)
		}
		return out
	}
	for i := range 50 {
		add(outAllowed, decision(0, 100, int64(99-i), -1, 1000))
		add(outLimited, decision(1, 100, 0, 250, 60000))
		add(outError, redcon.AppendError(nil, "ERR unknown command 'SL.CHECK'"))
		add(outError, redcon.AppendString(nil, "PONG")) // not a decision
		add(outError, redcon.AppendNull(nil))
		add(outError, decision(7))
		add(outError, redcon.AppendArray(nil, 0))
		// A long bulk inside an array (as LIMIT.INFO answers) to cross buffer ends.
		arr := redcon.AppendArray(nil, 2)
		arr = redcon.AppendInt(arr, 0)
		arr = redcon.AppendBulkString(arr, strings.Repeat("x", 300+i))
		add(outAllowed, arr)
	}
	return b, want
}

func TestReplyReaderPipelinedAndPartial(t *testing.T) {
	stream, want := replyStream()
	rng := rand.New(rand.NewPCG(1, 2))
	chunkings := map[string]func() int{
		"whole":  func() int { return len(stream) },
		"byte":   func() int { return 1 },
		"3":      func() int { return 3 },
		"random": func() int { return 1 + rng.IntN(200) },
	}
	for name, next := range chunkings {
		t.Run(name, func(t *testing.T) {
			src := &chunkReader{data: stream, next: next}
			// A small buffer forces compaction and growth.
			rd := newReplyReader(16)
			var got []outcome
			for len(got) < len(want) {
				resp, ok, err := rd.next()
				if err != nil {
					t.Fatalf("reply %d: %v", len(got), err)
				}
				if !ok {
					if err := rd.fill(src); err != nil {
						t.Fatalf("fill after %d replies: %v", len(got), err)
					}
					continue
				}
				got = append(got, classify(resp, true))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("reply %d counted %d, want %d", i, got[i], want[i])
				}
			}
			if rd.buffered() != 0 || len(src.data) != 0 {
				t.Fatalf("%d bytes left buffered, %d unread", rd.buffered(), len(src.data))
			}
		})
	}
}

func TestClassifyPlainModes(t *testing.T) {
	for _, raw := range []string{"+PONG\r\n", ":42\r\n", "$-1\r\n", "*1\r\n:1\r\n"} {
		_, resp := redcon.ReadNextRESP([]byte(raw))
		if got := classify(resp, false); got != outAllowed {
			t.Errorf("%q: counted %d, want allowed", raw, got)
		}
	}
	_, resp := redcon.ReadNextRESP([]byte("-ERR boom\r\n"))
	if got := classify(resp, false); got != outError {
		t.Errorf("error reply counted %d", got)
	}
	if got := describeBad(resp); got != "ERR boom" {
		t.Errorf("describeBad = %q", got)
	}
}

func TestReplyReaderProtocolError(t *testing.T) {
	rd := newReplyReader(64)
	if err := rd.fill(strings.NewReader("%2\r\n")); err != nil { // RESP3 map
		t.Fatal(err)
	}
	if _, _, err := rd.next(); err == nil {
		t.Fatal("RESP3 reply accepted by a RESP2 reader")
	}
}

func TestRequestEncoding(t *testing.T) {
	m, err := lookupMode("cl.throttle")
	if err != nil {
		t.Fatal(err)
	}
	q := m.request(Limit{Count: 100, Period: 0.5, Burst: 99, Cost: 1}, "")
	got := string(q.appendTo(nil, []byte("user:42")))
	want := "*6\r\n$11\r\nCL.THROTTLE\r\n$7\r\nuser:42\r\n$2\r\n99\r\n$3\r\n100\r\n$3\r\n0.5\r\n$1\r\n1\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	m, _ = lookupMode("lua-gcra")
	q = m.request(Limit{Count: 10, Period: 60, Burst: 9, Cost: 2}, "abc")
	got = string(q.appendTo(nil, []byte("k")))
	want = "*8\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\n9\r\n$2\r\n10\r\n$2\r\n60\r\n$1\r\n2\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	m, _ = lookupMode("ping")
	q = m.request(Limit{}, "")
	if got := string(q.appendTo(nil, []byte("ignored"))); got != "*1\r\n$4\r\nPING\r\n" {
		t.Fatalf("ping encoded as %q", got)
	}
}

// fakeConn answers every request written to it with one canned reply, in
// memory, so the worker's own cost can be measured without a server.
type fakeConn struct {
	net.Conn
	reply   []byte
	pending bytes.Buffer
	out     []byte
}

func (f *fakeConn) Write(p []byte) (int, error) {
	// Count requests by their array headers: every request starts a line
	// with '*' and no argument here does.
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '*' && (i == 0 || p[i-1] == '\n') {
			n++
		}
	}
	for range n {
		f.pending.Write(f.reply)
	}
	return len(p), nil
}

func (f *fakeConn) Read(p []byte) (int, error) { return f.pending.Read(p) }

func (f *fakeConn) SetDeadline(time.Time) error { return nil }

func newFakeWorker(t testing.TB, modeName string, reply string, pipeline int) (*worker, *runState) {
	m, err := lookupMode(modeName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Config{Target: Target{Addr: "127.0.0.1:1"}, Mode: modeName, Pipeline: pipeline, Hot: 0.1}.prepare()
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeConn{reply: []byte(reply)}
	fc.pending.Grow(64 << 10)
	w := newWorker(0, fc, cfg, m.request(cfg.Limit, "0123456789012345678901234567890123456789"))
	if m.lib != nil {
		if w.lib, err = newLibConn(m.lib, cfg.Limit); err != nil {
			t.Fatal(err)
		}
	}
	st := &runState{done: make(chan struct{}), timeout: time.Minute, decision: m.decision}
	return w, st
}

func TestWorkerBatchAllocatesNothing(t *testing.T) {
	for _, tc := range []struct{ mode, reply string }{
		{"ping", "+PONG\r\n"},
		{"incr", ":7\r\n"},
		{"cl.throttle", "*5\r\n:0\r\n:100\r\n:99\r\n:-1\r\n:0\r\n"},
		{"lua-gcra", "*5\r\n:1\r\n:100\r\n:0\r\n:12\r\n:1000\r\n"},
		{"redis-rate", "*4\r\n:1\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n"},
		{"fastify", "*2\r\n:1\r\n:1000\r\n"},
		{"limits-fixed", ":1\r\n"},
		// The clock argument is rewritten for every batch.
		{"limits-moving", ":1\r\n"},
	} {
		w, st := newFakeWorker(t, tc.mode, tc.reply, 16)
		allocs := testing.AllocsPerRun(200, func() {
			now := time.Now()
			if err := w.batch(st, 16, now, now); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", tc.mode, allocs)
		}
	}
}

// BenchmarkWorkerBatch measures the client's own cost per request (encode,
// parse, count, record latency) with the network taken out.
func BenchmarkWorkerBatch(b *testing.B) {
	for _, tc := range []struct{ mode, reply string }{
		{"ping", "+PONG\r\n"},
		{"cl.throttle", "*5\r\n:0\r\n:100\r\n:99\r\n:-1\r\n:0\r\n"},
	} {
		b.Run(tc.mode, func(b *testing.B) {
			w, st := newFakeWorker(b, tc.mode, tc.reply, 16)
			b.ReportAllocs()
			for b.Loop() {
				now := time.Now()
				if err := w.batch(st, 16, now, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/request")
		})
	}
}

// TestLimitAllRequest checks the LIMIT.ALL encoding names the key once per
// limit, with the suffixes, and parses as one well-formed command.
func TestLimitAllRequest(t *testing.T) {
	q := newLimitAllRequest(Limit{}.withDefaults())
	raw := q.appendTo(nil, []byte("k1"))
	complete, args, _, leftover, err := redcon.ReadNextCommand(raw, nil)
	if err != nil || !complete || len(leftover) != 0 {
		t.Fatalf("not one complete command: complete=%v leftover=%d err=%v", complete, len(leftover), err)
	}
	var got []string
	for _, a := range args {
		got = append(got, string(a))
	}
	want := "LIMIT.ALL 3 CL.THROTTLE k1 99 100 1 1 SW.CHECK k1:sw 100 1 1 FW.CHECK k1:fw 100 1 1"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}
