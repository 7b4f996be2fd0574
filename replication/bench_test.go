package replication

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/engine"
)

// BenchmarkReplicatedDecisions drives a 3-node group in one process (real
// TCP on loopback, bbolt with fsync) from 50 goroutines, each sending
// pipelines of 16 decisions to the leader. One b.N is one decision.
func BenchmarkReplicatedDecisions(b *testing.B) {
	for _, inflight := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("clients=50/pipeline=16/inflight=%d", inflight), func(b *testing.B) {
			benchReplicated(b, 50, 16, inflight)
		})
	}
}

func benchReplicated(b *testing.B, clients, pipeline, inflight int) {
	c := newCluster(b, 3, func(cfg *Config) {
		cfg.MaxInflight = inflight
		cfg.Logger = slog.New(slog.DiscardHandler)
	})
	l := c.leader()
	var target atomic.Pointer[testNode]
	target.Store(l)
	var errs atomic.Int64
	start := l.ReplicationStats()
	hist := hdrhistogram.New(1, int64(10*time.Second), 3)
	var histMu sync.Mutex
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			local := hdrhistogram.New(1, int64(10*time.Second), 3)
			batch := &engine.Batch{}
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "bench:%d:%d", g, i)
			}
			for i := 0; left.Add(-int64(pipeline)) > -int64(pipeline); i++ {
				batch.Reset()
				for j := range pipeline {
					c := batch.Add()
					c.Op = engine.OpSWCheck
					c.Key = keys[(i*pipeline+j)%len(keys)]
					c.N = [4]int64{1 << 40, int64(time.Minute), 1}
				}
				t0 := time.Now()
				target.Load().Execute(batch, time.Now().UnixNano())
				_ = local.RecordValue(int64(time.Since(t0)))
				if r := batch.Replies[0]; r.Kind != engine.ReplyDecision {
					// A disk stall past the leader lease moves leadership.
					errs.Add(1)
					if m, ok := isMoved(r.Err); ok {
						for _, n := range c.nodes {
							if n.ClientAddr() == m.Addr {
								target.Store(n)
							}
						}
					}
					time.Sleep(time.Millisecond)
				}
			}
			histMu.Lock()
			hist.Merge(local)
			histMu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	st := l.ReplicationStats()
	if t := target.Load(); t != l {
		b.Logf("leadership moved during the run; entry stats are the first leader's")
	}
	entries := st.Entries - start.Entries
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	if entries > 0 {
		b.ReportMetric(float64(st.Commands-start.Commands)/float64(entries), "decisions/entry")
	}
	b.ReportMetric(float64(hist.ValueAtQuantile(50))/1e6, "p50-ms")
	b.ReportMetric(float64(hist.ValueAtQuantile(99))/1e6, "p99-ms")
	b.ReportMetric(float64(errs.Load()), "failed-pipelines")
}

// BenchmarkFailover measures the time from a leader crash (closed without
// handing leadership over) to the first decision a new leader commits,
// over 20 fresh groups each loaded by 8 goroutines deciding on the leader
// until it dies, and reports the median and the maximum. Each sub-benchmark
// is one set of Raft timings (heartbeat/election/lease), so they compare
// side by side in one run.
func BenchmarkFailover(b *testing.B) {
	timings := []struct{ heartbeat, election, lease time.Duration }{
		{500 * time.Millisecond, 500 * time.Millisecond, 250 * time.Millisecond}, // the defaults before 2026-12-02
		{DefaultHeartbeatTimeout, DefaultElectionTimeout, DefaultLeaderLease},
		{250 * time.Millisecond, 250 * time.Millisecond, 125 * time.Millisecond}, // tighter still
	}
	for _, tm := range timings {
		name := fmt.Sprintf("heartbeat=%v/election=%v/lease=%v", tm.heartbeat, tm.election, tm.lease)
		b.Run(name, func(b *testing.B) {
			benchFailover(b, 20, func(cfg *Config) {
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = tm.heartbeat, tm.election, tm.lease
				cfg.Logger = slog.New(slog.DiscardHandler)
			})
		})
	}
}

func benchFailover(b *testing.B, runs int, tweak func(*Config)) {
	var times []time.Duration
	for range b.N {
		for range runs {
			c := newCluster(b, 3, tweak)
			old := c.leader()
			// The load: decisions on the leader until it is gone.
			var loaders sync.WaitGroup
			stop := make(chan struct{})
			for g := range 8 {
				loaders.Go(func() {
					key := fmt.Sprintf("load:%d", g)
					for {
						select {
						case <-stop:
							return
						default:
						}
						if r := run(old, fwCheck(key, 1<<40, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
							return // the leader is closing
						}
					}
				})
			}
			time.Sleep(200 * time.Millisecond)
			killed := time.Now()
			if err := old.close(false); err != nil {
				b.Logf("closing the leader: %v", err)
			}
			close(stop)
			var took time.Duration
			for took == 0 {
				if time.Since(killed) > 10*time.Second {
					b.Fatal("no new leader within 10 s")
				}
				for _, n := range c.live() {
					if n == old || !n.IsLeader() {
						continue
					}
					r := run(n, fwCheck("failover", 1<<40, 1)).Replies[0]
					if r.Kind == engine.ReplyDecision && !r.Dec.Limited {
						took = time.Since(killed)
					}
				}
				time.Sleep(time.Millisecond)
			}
			loaders.Wait()
			times = append(times, took)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(times[len(times)*9/10].Milliseconds()), "p90-ms")
	b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "max-ms")
	b.ReportMetric(0, "ns/op")
}
