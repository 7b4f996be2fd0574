package clientlib_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/replication"
	"github.com/sluicehq/sluice/server"
)

// startClusterNode runs one cluster member: engine, Raft node and server on
// loopback.
func startClusterNode(t *testing.T, bootstrap bool) *replication.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{Shards: 4})
	node, err := replication.Open(replication.Config{Dir: t.TempDir(), ClientAddr: ln.Addr().String(), Bootstrap: bootstrap}, eng)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{}, node)
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		node.Close()
		eng.Close()
	})
	return node
}

// TestLimiterOverClusterClient runs the Limiter through go-redis's
// ClusterClient against a three-node group, seeded with a follower.
func TestLimiterOverClusterClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Raft group")
	}
	first := startClusterNode(t, true)
	deadline := time.Now().Add(10 * time.Second)
	for !first.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var follower *replication.Node
	for range 2 {
		n := startClusterNode(t, false)
		if err := first.Join(n.ID(), n.RaftAddr(), n.ClientAddr()); err != nil {
			t.Fatal(err)
		}
		follower = n
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{follower.ClientAddr()},
		ContextTimeoutEnabled: true, MaxRetries: -1, MaxRedirects: 3})
	defer cc.Close()
	l := clientlib.NewLimiter(cc, clientlib.WithTimeout(5*time.Second), clientlib.WithFailurePolicy(clientlib.FailError))
	ctx := context.Background()
	limit := clientlib.GCRA(1, time.Minute, 3)
	for i := 0; i < 4; i++ {
		res, err := l.Allow(ctx, "cluster:user", limit)
		if err != nil {
			t.Fatalf("Allow %d: %v", i, err)
		}
		if res.Source != clientlib.FromServer || res.Allowed != (i < 3) {
			t.Fatalf("Allow %d: %+v", i, res)
		}
	}
	all, err := l.All(ctx,
		clientlib.Request{Key: "cluster:a", Limit: clientlib.SlidingWindow(5, time.Minute), Cost: 1},
		clientlib.Request{Key: "cluster:user", Limit: limit, Cost: 1})
	if err != nil || all.Allowed || all.Index != 1 {
		t.Fatalf("All with a tripping limit: %+v %v", all, err)
	}
	if info, err := l.Info(ctx, "cluster:a"); err != nil || info != nil {
		t.Fatalf("the refused All charged cluster:a: %+v %v", info, err)
	}
}

// TestNewClusterClientSettings: the settings a Limiter needs are set, the
// caller's own are kept, and the caller's options are not modified.
func TestNewClusterClientSettings(t *testing.T) {
	opt := &redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}
	cc := clientlib.NewClusterClient(opt)
	defer cc.Close()
	if got := cc.Options(); !got.ContextTimeoutEnabled || got.ClusterStateReloadInterval != clientlib.DefaultClusterStateReloadInterval {
		t.Fatalf("ContextTimeoutEnabled %v, ClusterStateReloadInterval %v", got.ContextTimeoutEnabled, got.ClusterStateReloadInterval)
	}
	if opt.ContextTimeoutEnabled || opt.ClusterStateReloadInterval != 0 {
		t.Fatalf("the caller's options were modified: %+v", opt)
	}
	own := clientlib.NewClusterClient(&redis.ClusterOptions{Addrs: opt.Addrs, ClusterStateReloadInterval: time.Minute})
	defer own.Close()
	if got := own.Options().ClusterStateReloadInterval; got != time.Minute {
		t.Fatalf("the caller's ClusterStateReloadInterval became %v", got)
	}
}
