package clientlib_test

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
)

// quietLog drops go-redis's own log lines: the outage tests make it
// report every refused dial, which is expected and drowns real failures.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	os.Exit(m.Run())
}

// testServer is a real Sluice server on loopback, with the debug clock.
type testServer struct {
	Addr string
	eng  *engine.Engine
	srv  *server.Server
	done chan struct{}
}

// serve starts a server on ln.
func serve(ln net.Listener) *testServer {
	eng := engine.New(engine.Config{})
	srv := server.New(server.Config{EnableDebug: server.DebugYes}, eng)
	s := &testServer{Addr: ln.Addr().String(), eng: eng, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		srv.Serve(ln)
	}()
	return s
}

// Close stops the server and waits for it; closing twice is harmless.
func (s *testServer) Close() {
	s.srv.Close()
	<-s.done
	s.eng.Close()
}

// startServer starts a server on 127.0.0.1:0, stopped at the end of the
// test.
func startServer(tb testing.TB) *testServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := serve(ln)
	tb.Cleanup(s.Close)
	return s
}

// restartServer starts a new server on the address a stopped one used.
func restartServer(tb testing.TB, addr string) *testServer {
	tb.Helper()
	var ln net.Listener
	var err error
	// The old listener is closed; the port can be rebound at once
	// (SO_REUSEADDR), but give a slow kernel a few tries.
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		tb.Fatal(err)
	}
	s := serve(ln)
	tb.Cleanup(s.Close)
	return s
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

// freezeClock stops the server clock a little ahead of where it is (it may
// not go backwards) and returns the frozen unix ms.
func freezeClock(tb testing.TB, rdb redis.UniversalClient) int64 {
	tb.Helper()
	ctx := context.Background()
	now, err := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Int64()
	if err != nil {
		tb.Fatal(err)
	}
	now += 1000
	if err := rdb.Do(ctx, "DEBUG", "CLOCK", "SET", now).Err(); err != nil {
		tb.Fatal(err)
	}
	return now
}

// setClock moves the frozen server clock to ms.
func setClock(tb testing.TB, rdb redis.UniversalClient, ms int64) {
	tb.Helper()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "SET", ms).Err(); err != nil {
		tb.Fatal(err)
	}
}

// advanceClock moves the frozen server clock forward.
func advanceClock(tb testing.TB, rdb redis.UniversalClient, d time.Duration) {
	tb.Helper()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "ADVANCE", d.Milliseconds()).Err(); err != nil {
		tb.Fatal(err)
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

// proxyMode is how a proxy treats traffic.
type proxyMode int32

const (
	forward   proxyMode = iota
	blackhole           // accept, swallow requests, never answer
	refuse              // close every connection at once
)

// proxy is a TCP proxy in front of a server, to make the server vanish in
// the ways networks do without stopping it.
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) setMode(m proxyMode) {
	p.mode.Store(int32(m))
	if m == refuse {
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if proxyMode(p.mode.Load()) == refuse || !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	if proxyMode(p.mode.Load()) == blackhole {
		io.Copy(io.Discard, c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		return
	}
	defer up.Close()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(c, up)
		c.Close()
	}()
	// Client to server: once the proxy starts swallowing, this connection
	// stays swallowed, so a request cut in half is never forwarded.
	buf := make([]byte, 32<<10)
	swallowing := false
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if !swallowing && proxyMode(p.mode.Load()) != forward {
				swallowing = true
			}
			if !swallowing {
				if _, werr := up.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
