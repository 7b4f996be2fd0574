package server_test

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
)

type testServer struct {
	addr string
	rdb  *redis.Client
	eng  *engine.Engine
	srv  *server.Server
}

// startServer runs a real server on 127.0.0.1:0 and returns it with a
// connected go-redis client; everything stops when the test ends.
func startServer(t testing.TB, cfg server.Config, ecfg engine.Config) *testServer {
	t.Helper()
	if cfg.EnableDebug == server.DebugNo {
		cfg.EnableDebug = server.DebugYes
	}
	eng := engine.New(ecfg)
	srv := server.New(cfg, eng)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		srv.Serve(ln)
		close(done)
	}()
	rdb := redis.NewClient(&redis.Options{
		Addr: ln.Addr().String(), Password: cfg.RequirePass, Protocol: 2,
		PoolSize: 80, MaxRetries: -1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	})
	ts := &testServer{addr: ln.Addr().String(), rdb: rdb, eng: eng, srv: srv}
	t.Cleanup(func() {
		rdb.Close()
		srv.Close()
		<-done
		eng.Close()
	})
	return ts
}

func (ts *testServer) do(t testing.TB, args ...any) any {
	t.Helper()
	v, err := ts.rdb.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("%v: unexpected error %v", args, err)
	}
	return v
}

// expect runs a command and compares the reply with want, which may be an
// error string (prefix "ERR ..." etc.), nil, or a Go value as go-redis
// decodes it.
func (ts *testServer) expect(t testing.TB, want any, args ...any) {
	t.Helper()
	v, err := ts.rdb.Do(context.Background(), args...).Result()
	if werr, ok := want.(error); ok {
		if err == nil || err.Error() != werr.Error() {
			t.Fatalf("%v: got (%v, %v), want error %q", args, v, err, werr)
		}
		return
	}
	if err == redis.Nil {
		err, v = nil, nil
	}
	if err != nil {
		t.Fatalf("%v: unexpected error %v", args, err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("%v: got %#v, want %#v", args, v, want)
	}
}

// freezeClock sets the server clock to a fixed base well after any time
// it has used, and returns the base in unix ms.
func (ts *testServer) freezeClock(t testing.TB) int64 {
	t.Helper()
	now := ts.do(t, "DEBUG", "CLOCK", "GET").(int64)
	base := now + 1000
	ts.expect(t, "OK", "DEBUG", "CLOCK", "SET", base)
	return base
}

func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

func errf(format string, a ...any) error { return fmt.Errorf(format, a...) }
