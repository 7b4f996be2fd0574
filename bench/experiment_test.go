package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// testLog sends an experiment's step lines to t.Log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// smokeEnv is a smoke-mode environment with both servers; -short makes it
// quicker still.
func smokeEnv(t *testing.T) *expEnv {
	t.Helper()
	sluicetest.Require(t, "redis-server")
	env := newExpEnv(ExperimentConfig{SluiceServer: sluicetest.Binary(t), Smoke: true, Log: testLog{t}})
	env.quick = testing.Short()
	t.Cleanup(func() {
		if err := env.close(); err != nil {
			t.Errorf("stop servers: %v", err)
		}
	})
	return env
}

// checkReport renders and writes a report, and checks the files exist.
func checkReport(t *testing.T, name string, rep *ExperimentReport, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep.Name, rep.Title = name, name
	dir := t.TempDir()
	paths, err := WriteExperiment(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	var pngs int
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", p, err)
		}
		if strings.HasSuffix(p, ".png") {
			b, _ := os.ReadFile(p)
			if !bytes.HasPrefix(b, []byte("\x89PNG")) {
				t.Fatalf("%s is not a PNG", p)
			}
			pngs++
		}
	}
	if pngs == 0 || len(rep.CSV) < 2 || !strings.Contains(rep.Markdown("img"), "](img/") {
		t.Fatalf("report lacks a chart, CSV rows or image links: %v\n%s", paths, rep.Markdown("img"))
	}
	t.Log(rep.Summary)
}

// TestExperimentsSmoke runs every experiment in smoke mode against servers
// it starts itself and checks the headline facts of EXPERIMENTS.md.
func TestExperimentsSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("boundary", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runBoundary(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		fw, sl, sw, cl := r.row("sluice", "FW.CHECK"), r.row("sluice", "SL.CHECK"), r.row("sluice", "SW.CHECK"), r.row("sluice", "CL.THROTTLE")
		if fw == nil || sl == nil || sw == nil || cl == nil {
			t.Fatalf("missing Sluice rows: %+v", r.Burst)
		}
		// The fixed window's boundary burst: 100 either side, 200 in 20 ms.
		if fw.First != 100 || fw.Second != 100 || fw.Peak != 200 {
			t.Errorf("FW.CHECK: %+v, want 100 + 100, peak 200", *fw)
		}
		// The sliding log is exact.
		if sl.First+sl.Second != 100 || sl.Peak != 100 {
			t.Errorf("SL.CHECK: %+v, want exactly 100", *sl)
		}
		if sw.Peak > 101 || cl.Peak > 101 {
			t.Errorf("SW.CHECK %+v, CL.THROTTLE %+v: more than 1%% over", *sw, *cl)
		}
		if lua := r.row("redis", "Lua fixed window (INCR+PEXPIRE)"); lua == nil || lua.Peak != 200 {
			t.Errorf("Redis fixed-window Lua: %+v, want a peak of 200", lua)
		}
		for _, u := range r.Uniform {
			if u.Requests != uniformRequests {
				t.Errorf("uniform %s %s: %d requests", u.Server, u.Impl, u.Requests)
			}
			if u.Impl == "SL.CHECK" && u.Peak > boundaryLimit {
				t.Errorf("SL.CHECK admitted %d in some 2 s of the uniform stream", u.Peak)
			}
			if u.Impl == "SW.CHECK" && u.Disagree <= 0 {
				t.Errorf("SW.CHECK never disagreed with the exact log: %+v", u)
			}
		}
		rep, err := r.report()
		checkReport(t, "boundary", rep, err)
	})

	t.Run("reset-race", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runResetRace(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		var sluiceRows int
		for _, row := range r.Rows {
			switch row.Impl {
			case raceSluice, raceLua:
				if row.Leak() != 0 {
					t.Errorf("%s at %v: admitted %d of a %d budget", row.Impl, row.Gap, row.Admitted, row.Budget)
				}
				if row.Impl == raceSluice {
					sluiceRows++
				}
			}
		}
		if sluiceRows == 0 {
			t.Fatal("no Sluice rows")
		}
		rep, err := r.report()
		checkReport(t, "reset-race", rep, err)
	})

	t.Run("reset-header", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runResetHeader(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		stored := r.find("sluice", hdrStored)
		if stored == nil || len(stored.Resets) < 10 {
			t.Fatalf("Sluice stored reset: %+v", stored)
		}
		if stored.Spread() != 0 {
			t.Errorf("Sluice's stored reset moved by %d ms within one window", stored.Spread())
		}
		if e := r.find("redis", hdrExpiretime); e == nil || e.Spread() != 0 {
			t.Errorf("Redis PEXPIRETIME moved within one window: %+v", e)
		}
		rep, err := r.report()
		checkReport(t, "reset-header", rep, err)
	})

	t.Run("replica-lag", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runReplicaLag(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range r.Rows {
			if row.Probes == 0 {
				t.Errorf("%+v: no requests", row)
			}
			if row.Design == lagPrimary && row.Wrong != 0 {
				t.Errorf("deciding on the primary rejected wrongly: %+v", row)
			}
			if row.Lag >= 50*time.Millisecond && row.Measured < 40*time.Millisecond {
				t.Errorf("the proxy did not delay replication: %+v", row)
			}
		}
		if row := r.find(lagReplica, 50*time.Millisecond); row == nil || row.Wrong == 0 {
			t.Errorf("a 50 ms replica lag never caused a wrong rejection: %+v", row)
		}
		// Sluice: every decision sent to the lagging follower is redirected
		// to the leader, and none is rejected wrongly, though the
		// follower's own state was behind.
		if !r.Sluice {
			t.Fatalf("no Sluice half: %v", r.Notes)
		}
		for _, lag := range lagLagsSmoke {
			row := r.find(lagSluice, lag)
			if row == nil || row.Probes != lagTrialsSmoke*lagProbes {
				t.Fatalf("Sluice at %v: %+v", lag, row)
			}
			if row.Wrong != 0 || row.FollowerAnswered != 0 || row.Redirected != row.Probes {
				t.Errorf("Sluice at %v: %d wrong rejections, %d decisions answered by the follower, %d of %d redirected",
					lag, row.Wrong, row.FollowerAnswered, row.Redirected, row.Probes)
			}
			if lag >= 50*time.Millisecond && (row.Measured < 40*time.Millisecond || row.Stale == 0) {
				t.Errorf("the proxy did not slow the follower's Raft link: %+v", row)
			}
		}
		rep, err := r.report()
		checkReport(t, "replica-lag", rep, err)
	})

	t.Run("eviction", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runEviction(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		var redisLost, sluiceRows int
		for _, row := range r.Rows {
			switch row.Server {
			case "sluice":
				sluiceRows++
				if row.Lost != 0 || row.FreeQuota != 0 {
					t.Errorf("Sluice lost limiters: %+v", row)
				}
			case "redis":
				redisLost += row.Lost
			}
		}
		if sluiceRows == 0 {
			t.Fatal("no Sluice rows")
		}
		if redisLost == 0 {
			t.Errorf("Redis with allkeys-lru evicted no limiter: %+v", r.Rows)
		}
		for _, c := range r.Caches {
			if c.Server == "sluice" && (c.Refused == 0 || c.Evicted != 0) {
				t.Errorf("Sluice at maxmemory: %+v, want OOM refusals and no evictions", c)
			}
		}
		rep, err := r.report()
		checkReport(t, "eviction", rep, err)
	})

	t.Run("shards", func(t *testing.T) {
		env := smokeEnv(t)
		r, err := runShards(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Rows) != 2*len(shardCountsSmoke)+4 {
			t.Fatalf("%d rows: %+v", len(r.Rows), r.Rows)
		}
		for _, row := range r.Rows {
			if row.Requests == 0 || row.Throughput <= 0 || row.Errors != 0 || row.Failure != "" {
				t.Errorf("%+v", row)
			}
			if row.CPUPerOp <= 0 {
				t.Errorf("no server CPU measured: %+v", row)
			}
		}
		rep, err := r.report()
		checkReport(t, "shards", rep, err)
	})
}

// The experiment table and RunExperiment agree, and an unknown name is an
// error that lists the known ones.
func TestExperimentNames(t *testing.T) {
	names := ExperimentNames()
	want := []string{"boundary", "reset-race", "reset-header", "replica-lag", "eviction", "shards", "failover"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("names %v", names)
	}
	_, err := RunExperiment(context.Background(), "nope", ExperimentConfig{})
	if err == nil || !strings.Contains(err.Error(), "reset-race") {
		t.Fatalf("err = %v", err)
	}
}

// RunExperiment without a Sluice binary runs the Redis half and says the
// Sluice half was skipped.
func TestRunExperimentWithoutSluice(t *testing.T) {
	sluicetest.Require(t, "redis-server")
	rep, err := RunExperiment(context.Background(), "reset-race", ExperimentConfig{Smoke: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Name != "reset-race" || !strings.Contains(strings.Join(rep.Notes, "\n"), "Sluice half skipped") {
		t.Fatalf("%+v", rep)
	}
	for _, row := range rep.CSV[1:] {
		if strings.HasPrefix(row[0], "Sluice") {
			t.Fatalf("Sluice row without Sluice: %v", row)
		}
	}
}

func TestPeakInWindowAndExactLog(t *testing.T) {
	if got := peakInWindow([]int64{0, 1990, 1990, 2010, 3989, 4000}, 2000); got != 4 {
		t.Errorf("peak %d, want 4 (1990, 1990, 2010, 3989)", got)
	}
	if got := peakInWindow([]int64{0, 2000, 4000}, 2000); got != 1 {
		t.Errorf("peak %d, want 1: the intervals are half-open", got)
	}
	if got := peakInWindow(nil, 2000); got != 0 {
		t.Errorf("empty: %d", got)
	}
	l := &exactLog{limit: 2, window: 1000}
	var got []bool
	for _, ts := range []int64{0, 10, 999, 1000, 1009, 1010, 1011} {
		got = append(got, l.allow(ts))
	}
	want := []bool{true, true, false, true, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("exact log decisions %v, want %v", got, want)
		}
	}
}

func TestKeySplit(t *testing.T) {
	s0, s1 := KeySplit{Of: 2, Index: 0}.shareOf("k:", "", 1000), KeySplit{Of: 2, Index: 1}.shareOf("k:", "", 1000)
	if len(s0)+len(s1) != 1000 || len(s0) < 400 || len(s1) < 400 {
		t.Fatalf("shares %d + %d", len(s0), len(s1))
	}
	for _, n := range s1 {
		if (KeySplit{Of: 2}).Owner("k:"+itoa(int64(n))) != 1 {
			t.Fatalf("key %d is in share 1 but owned by 0", n)
		}
	}
	if (KeySplit{}).shareOf("k:", "", 10) != nil {
		t.Fatal("no split must mean the whole key space")
	}
	_, err := Run(context.Background(), Config{Target: Target{Addr: "127.0.0.1:1"}, Mode: "ping", Split: KeySplit{Of: 2, Index: 2}})
	if err == nil || !strings.Contains(err.Error(), "split index") {
		t.Fatalf("bad split accepted: %v", err)
	}
}

// Under a split, a run sends only its share's keys.
func TestRunSendsOnlyItsShare(t *testing.T) {
	s, _ := startRedis(t)
	res, err := Run(context.Background(), Config{Target: redisTarget(s), Mode: "incr", Requests: 500, Conns: 2, Pipeline: 5,
		Keys: 50, KeyPrefix: "split:", Split: KeySplit{Of: 3, Index: 1}})
	if err != nil || res.Errors != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	c := newExpEnv(ExperimentConfig{}).newClient(s.Addr, 1)
	defer c.Close()
	keys, err := c.Keys(context.Background(), "split:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for _, k := range keys {
		if (KeySplit{Of: 3}).Owner(k) != 1 {
			t.Fatalf("key %s belongs to another share", k)
		}
	}
}

func TestDelayProxyDelays(t *testing.T) {
	s, _ := startRedis(t)
	p, err := faultproxy.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := newExpEnv(ExperimentConfig{}).newClient(p.Addr(), 1)
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(faultproxy.Replies, 30*time.Millisecond)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
		t.Fatalf("a round trip through a 30ms proxy took %v", d)
	}
	if _, err := faultproxy.New("10.0.0.1:6379"); err == nil {
		t.Fatal("proxy to a remote target accepted")
	}
}

// The forward proxy delays what the client sends (Raft's leader is the
// client of its followers' transports): a write through it reaches the
// target the lag late.
func TestForwardDelayProxyDelays(t *testing.T) {
	s, _ := startRedis(t)
	p, err := faultproxy.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	env := newExpEnv(ExperimentConfig{})
	defer env.close()
	c, direct := env.newClient(p.Addr(), 1), env.newClient(s.Addr, 1)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(faultproxy.Requests, 30*time.Millisecond)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.Set(ctx, "fwd", "x", 0).Err() }()
	for {
		v, err := direct.Get(ctx, "fwd").Result()
		if err == nil && v == "x" {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the write did not arrive: %q %v", v, err)
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("a write through a 30ms forward proxy arrived after %v", d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := faultproxy.New("10.0.0.1:6379"); err == nil {
		t.Fatal("proxy to a remote target accepted")
	}
}
