// Package sluicetest is the one home of the helpers Sluice's tests share:
// a real server on 127.0.0.1:0 with a connected go-redis client, the
// debug clock moved over the wire, the real sluice-server binary built once
// per test binary, and the peers (redis-server, redis-cli) the tests look
// for. Everything a helper starts is stopped by t.Cleanup (or, for the
// built binary, by Main).
package sluicetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/server"
)

// Server is a real Sluice server (a standalone engine behind server.Server)
// listening on loopback.
type Server struct {
	Addr   string
	Client *redis.Client // RESP2, generous timeouts and pool
	Engine *engine.Engine
	Server *server.Server
	Clock  *clock.Clock

	done      chan struct{}
	closeOnce sync.Once
}

// Options configure Start. The zero value is usable.
type Options struct {
	Server server.Config // EnableDebug defaults to DebugYes here
	Engine engine.Config
	// Listener, when set, is served instead of a new 127.0.0.1:0 one (to
	// restart a server on the address of one that stopped).
	Listener net.Listener
}

// Start runs a server and connects a client to it; both stop when the test
// ends.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			tb.Fatal(err)
		}
	}
	s := Serve(ln, o)
	s.Client = redis.NewClient(&redis.Options{
		Addr: s.Addr, Password: o.Server.RequirePass, Protocol: 2,
		PoolSize: 80, MaxRetries: -1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	})
	tb.Cleanup(func() {
		s.Client.Close()
		s.Close()
	})
	return s
}

// Restart starts a server (as Start) on the address a stopped one used.
func Restart(tb testing.TB, addr string, o Options) *Server {
	tb.Helper()
	var err error
	// The old listener is closed; the port can be rebound at once
	// (SO_REUSEADDR), but give a slow kernel a few tries.
	for range 50 {
		if o.Listener, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return Start(tb, o)
}

// Serve runs a server on ln without a client or cleanup: for tests that
// stop and restart servers themselves. Close stops it.
func Serve(ln net.Listener, o Options) *Server {
	if o.Server.EnableDebug == server.DebugNo {
		o.Server.EnableDebug = server.DebugYes
	}
	if o.Server.Clock == nil {
		o.Server.Clock = clock.New(nil)
	}
	if o.Server.Scripts == nil {
		o.Server.Scripts = server.NewScripts(nil)
	}
	if o.Engine.Scripts == nil {
		o.Engine.Scripts = o.Server.Scripts
	}
	eng := engine.New(o.Engine)
	srv := server.New(o.Server, eng)
	s := &Server{Addr: ln.Addr().String(), Engine: eng, Server: srv, Clock: o.Server.Clock, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		srv.Serve(ln)
	}()
	return s
}

// Close stops the server and its engine and waits; closing twice is
// harmless.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.Server.Close()
		<-s.done
		s.Engine.Close()
	})
}

// Do runs a command and fails the test on any error but nil.
func (s *Server) Do(tb testing.TB, args ...any) any {
	tb.Helper()
	v, err := s.Client.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		tb.Fatalf("%v: unexpected error %v", args, err)
	}
	return v
}

// Expect runs a command and compares the reply with want: an error (its
// text, "ERR ..." and the like), nil, or a Go value as go-redis decodes it.
func (s *Server) Expect(tb testing.TB, want any, args ...any) {
	tb.Helper()
	v, err := s.Client.Do(context.Background(), args...).Result()
	if werr, ok := want.(error); ok {
		if err == nil || err.Error() != werr.Error() {
			tb.Fatalf("%v: got (%v, %v), want error %q", args, v, err, werr)
		}
		return
	}
	if err == redis.Nil {
		err, v = nil, nil
	}
	if err != nil {
		tb.Fatalf("%v: unexpected error %v", args, err)
	}
	if !reflect.DeepEqual(v, want) {
		tb.Fatalf("%v: got %#v, want %#v", args, v, want)
	}
}

// FreezeClock stops the server clock behind rdb a second ahead of where it
// is (it may not go backwards: the server has already used now) and returns
// the frozen time in unix ms.
func FreezeClock(tb testing.TB, rdb redis.UniversalClient) int64 {
	tb.Helper()
	ctx := context.Background()
	now, err := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Int64()
	if err != nil {
		tb.Fatal(err)
	}
	now += 1000
	SetClock(tb, rdb, now)
	return now
}

// SetClock moves the frozen server clock to ms (unix).
func SetClock(tb testing.TB, rdb redis.UniversalClient, ms int64) {
	tb.Helper()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "SET", ms).Err(); err != nil {
		tb.Fatal(err)
	}
}

// AdvanceClock moves the frozen server clock forward by d.
func AdvanceClock(tb testing.TB, rdb redis.UniversalClient, d time.Duration) {
	tb.Helper()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "ADVANCE", d.Milliseconds()).Err(); err != nil {
		tb.Fatal(err)
	}
}

// Proxy starts a fault proxy in front of target, closed when the test ends.
func Proxy(tb testing.TB, target string) *faultproxy.Proxy {
	tb.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

var build struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// Binary builds cmd/sluice-server once per test binary and returns its
// path. Call Main from the package's TestMain so the build is removed.
func Binary(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "sluice-bin-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "sluice-server")
		build.out, build.err = exec.Command("go", "build", "-o", build.path, "github.com/sluicehq/sluice/cmd/sluice-server").CombinedOutput()
	})
	if build.err != nil {
		tb.Fatalf("build sluice-server: %v\n%s", build.err, build.out)
	}
	return build.path
}

// Main runs the package's tests and removes what Binary built. Use it as
// TestMain: func TestMain(m *testing.M) { sluicetest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// Require returns the path of a peer program the tests drive (redis-cli,
// redis-server). Without it the test is skipped, except under CI (CI set),
// where a missing peer is a failure: .ci/run installs them.
func Require(tb testing.TB, program string) string {
	tb.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is required under CI: %v", program, err)
		}
		tb.Skipf("%s not installed: %v", program, err)
	}
	return path
}

// WaitFor polls cond every 5 ms until it holds, failing the test after d.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ints boxes integers as go-redis decodes an array of them.
func Ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// Errorf is an expected error reply for Expect.
func Errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
