package script

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// gcraBench is go-redis/redis_rate's allowN script (GCRA), as limiter
// libraries send it: TIME, GET and SET, three calls into the host. The
// text is sluice-bench's copy, checked against the library's own bytes.
func gcraBench(b *testing.B) []byte {
	file, err := os.ReadFile("../../bench/scripts/redis_rate_allown.lua")
	if err != nil {
		b.Fatal(err)
	}
	_, body, ok := strings.Cut(string(file), "-- sluice-bench: end of header\n")
	if !ok {
		b.Fatal("redis_rate_allown.lua has no header marker")
	}
	return []byte(body)
}

// benchHost answers TIME, GET and SET without allocating.
type benchHost struct {
	time  engine.Reply
	tat   []byte
	calls int
}

func newBenchHost() *benchHost {
	return &benchHost{time: engine.Reply{Kind: engine.ReplyArray, Items: []engine.Reply{
		{Kind: engine.ReplyBulk, Bulk: []byte("1700000000")},
		{Kind: engine.ReplyBulk, Bulk: []byte("123456")},
	}}}
}

func (h *benchHost) Call(args [][]byte) engine.Reply {
	h.calls++
	switch args[0][0] {
	case 'T':
		return h.time
	case 'G':
		return engine.Reply{Kind: engine.ReplyNil}
	}
	return engine.Reply{Kind: engine.ReplyOK}
}
func (h *benchHost) Now() int64      { return 0 }
func (h *benchHost) Log(int, string) {}

func benchRun(b *testing.B, cfg Config, ctx context.Context) {
	e := New(cfg)
	h := newBenchHost()
	body := gcraBench(b)
	keys := [][]byte{[]byte("rl:user:42")}
	args := [][]byte{[]byte("10"), []byte("10"), []byte("1"), []byte("1")}
	if r := e.Run(ctx, body, keys, args, h); r.Kind != engine.ReplyArray || len(r.Items) != 4 {
		b.Fatalf("reply %+v", r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Run(ctx, body, keys, args, h)
	}
}

// The default: the per-instruction hook on (a cancellable context and
// the memory bound).
func BenchmarkGCRA(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchRun(b, Config{}, ctx)
}

// No hook: a context that cannot be cancelled and no memory bound.
func BenchmarkGCRANoHook(b *testing.B) {
	benchRun(b, Config{MemoryLimit: -1}, context.Background())
}
