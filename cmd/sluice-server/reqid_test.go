package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestClientlibAcrossALeaderKillChargesExactlyOnce: clientlib over an
// unmodified go-redis ClusterClient, 24 workers deciding on twenty keys
// of a three-node group, and the leader killed with SIGKILL mid-run. Each
// logical request keeps one request id over all its attempts (the
// Limiter's own retry, then the caller's, until an answer comes), so when
// the run ends the state of every key must hold exactly the allows the
// workers were told of: none lost, none charged twice, no unknowns.
func TestClientlibAcrossALeaderKillChargesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and kills one")
	}
	node := func(more ...string) []string {
		return append([]string{"--dir", t.TempDir(), "--cluster-enabled", "yes"}, more...)
	}
	addrs := make([]string, 3)
	cmds := make([]*exec.Cmd, 3)
	addrs[0], cmds[0] = startBinary(t, node("--cluster-bootstrap", "yes")...)
	addrs[1], cmds[1] = startBinary(t, node("--cluster-join", addrs[0])...)
	addrs[2], cmds[2] = startBinary(t, node("--cluster-join", addrs[0])...)
	first := sluicetest.DialRaw(t, "tcp", addrs[0])
	sluicetest.WaitFor(t, 30*time.Second, "three nodes in the group", func() bool {
		info := first.Do(t, "CLUSTER", "INFO")
		return strings.Contains(info, "cluster_known_nodes:3") && strings.Contains(info, "cluster_state:ok")
	})
	leaderIdx := -1
	for i, a := range addrs {
		if strings.Contains(sluicetest.DialRaw(t, "tcp", a).Do(t, "INFO", "replication"), "role:master") {
			leaderIdx = i
		}
	}
	if leaderIdx < 0 {
		t.Fatal("no node says it leads")
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	defer cc.Close()
	l := clientlib.NewLimiter(cc, clientlib.WithTimeout(500*time.Millisecond), clientlib.WithFailurePolicy(clientlib.FailError))
	// Never refused within the run: every answered request is an allow.
	limit := clientlib.GCRA(1, time.Hour, 100_000)
	const keys, workers = 20, 24
	var (
		mu       sync.Mutex
		acked    [keys]int64
		answered atomic.Int64
		retried  atomic.Int64 // logical requests that needed more than one call
		killedAt atomic.Int64 // answered when the leader was killed
		after    atomic.Int64 // answered after the kill
	)
	ctx := context.Background()
	stop := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				if killedAt.Load() > 0 && after.Load() >= 400 {
					return
				}
				k := (w*7 + i) % keys
				rctx := clientlib.WithRequestID(ctx, fmt.Sprintf("w%d-%d", w, i))
				for attempt := 0; ; attempt++ {
					res, err := l.Allow(rctx, fmt.Sprintf("exact:%d", k), limit)
					if err == nil {
						if !res.Allowed || res.Source != clientlib.FromServer {
							errs <- fmt.Errorf("worker %d: %+v", w, res)
							return
						}
						mu.Lock()
						acked[k]++
						mu.Unlock()
						answered.Add(1)
						if killedAt.Load() > 0 {
							after.Add(1)
						}
						if attempt > 0 {
							retried.Add(1)
						}
						break
					}
					if !errors.Is(err, clientlib.ErrUnavailable) || time.Now().After(stop) {
						errs <- fmt.Errorf("worker %d attempt %d: %v", w, attempt, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	sluicetest.WaitFor(t, 30*time.Second, "traffic before the kill", func() bool {
		if len(errs) > 0 {
			t.Fatal(<-errs)
		}
		return answered.Load() >= 300
	})
	killedAt.Store(answered.Load())
	killed := time.Now()
	killHard(t, cmds[leaderIdx])
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if after.Load() < 400 {
		t.Fatalf("%d requests answered after the kill, want 400", after.Load())
	}
	if retried.Load() == 0 {
		t.Fatal("no request needed a retry: the kill hit nothing in flight, and the test proves nothing")
	}
	for k := range keys {
		info, err := l.Info(ctx, fmt.Sprintf("exact:%d", k))
		if err != nil || info == nil {
			t.Fatalf("key %d: %+v %v", k, info, err)
		}
		if charged := info.Limit - info.Remaining; charged != acked[k] {
			t.Errorf("key %d: charged %d, acknowledged %d", k, charged, acked[k])
		}
	}
	t.Logf("%d requests answered (%d after the kill; the run ended %v after it), %d of them retried with their id",
		answered.Load(), after.Load(), time.Since(killed).Round(time.Millisecond), retried.Load())
}
