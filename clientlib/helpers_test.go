package clientlib_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
)

// quietLog drops go-redis's own log lines: the outage tests make it
// report every refused dial, which is expected and drowns real failures.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	os.Exit(m.Run())
}

// newClient returns a go-redis client for addr, closed at the end of the
// test.
func newClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// newLimiter is NewLimiter with a generous timeout, for tests that are not
// about the timeout: a loaded machine (go test ./... runs packages side by
// side, under the race detector) can stall a call past 50 ms, and the
// failure policy answering would fail a test about something else.
func newLimiter(rdb redis.UniversalClient, opts ...clientlib.Option) *clientlib.Limiter {
	return clientlib.NewLimiter(rdb, append([]clientlib.Option{clientlib.WithTimeout(10 * time.Second)}, opts...)...)
}

// untilServer calls Allow until the server answers (a stall on a loaded
// machine can make a single call time out) and returns that answer.
func untilServer(tb testing.TB, l *clientlib.Limiter, key string, limit clientlib.Limit) clientlib.Result {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := l.Allow(context.Background(), key, limit)
		if err == nil && r.Source == clientlib.FromServer {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the server never answered: %+v %v", r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClock is local time moved by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countHook counts the commands a client sends, by name.
type countHook struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		if h.n == nil {
			h.n = map[string]int{}
		}
		h.n[cmd.Name()]++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *countHook) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}
