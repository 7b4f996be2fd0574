package script

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// gcraBench is go-redis/redis_rate's allowN script (GCRA), as limiter
// libraries send it: TIME, GET and SET, three calls into the host.
const gcraBench = `-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])

local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst

local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

local tat = redis.call("GET", rate_limit_key)

if not tat then
  tat = now
else
  tat = tonumber(tat)
end

tat = math.max(tat, now)

local new_tat = tat + increment
local allow_at = new_tat - burst_offset

local diff = now - allow_at
local remaining = diff / emission_interval

if remaining < 0 then
  local reset_after = tat - now
  local retry_after = diff * -1
  return {
    0, -- allowed
    0, -- remaining
    tostring(retry_after),
    tostring(reset_after),
  }
end

local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
local retry_after = -1
return {cost, remaining, tostring(retry_after), tostring(reset_after)}
`

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
	body := []byte(gcraBench)
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
