package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The shards experiment: decisions/s and server CPU per decision with the
// keys spread over shards (Sluice) or over servers split by CRC32 in the
// client (Redis), and with every request on one hot key.
const (
	shardConns    = 50
	shardPipeline = 16
	shardKeys     = 10000
)

var (
	shardCounts      = []int{1, 2, 4, 8}
	shardCountsSmoke = []int{1, 2}
)

// shardRow is one configuration under one key pattern.
type shardRow struct {
	Server  string // sluice or redis
	Setup   string // "1 shard", "2 servers", ...
	Pattern string // uniform or hot key
	// Runs are the runs that made this row (one per Redis server).
	Requests   int64
	Elapsed    time.Duration
	Throughput float64
	CPU        time.Duration // all servers' CPU over the run
	CPUPerOp   float64       // us
	CPUUtil    float64       // in cores
	P50, P99   time.Duration // of the first run
	Errors     int64
	Failure    string
}

type shardResult struct {
	Duration time.Duration
	Conns    int
	Rows     []shardRow
	Notes    []string
}

func runShards(ctx context.Context, env *expEnv) (*shardResult, error) {
	dur, counts, conns := 3*time.Second, shardCounts, shardConns
	if env.smoke() {
		// Fewer connections too: each costs a latency histogram to set up.
		dur, counts, conns = 300*time.Millisecond, shardCountsSmoke, 8
	}
	if env.quick {
		dur = 150 * time.Millisecond
	}
	res := &shardResult{Duration: dur, Conns: conns}
	patterns := []struct {
		name string
		hot  float64
	}{{"uniform", 0}, {"hot key", 1}}
	if env.hasSluice() {
		for _, n := range counts {
			srv, _, err := env.startSluice(ctx, "--shards", strconv.Itoa(n))
			if err != nil {
				return nil, fmt.Errorf("sluice --shards %d: %w", n, err)
			}
			for _, p := range patterns {
				r, err := Run(ctx, Config{
					Target: Target{Kind: KindSluice, Addr: srv.Addr, Pid: srv.Pid()}, Mode: "cl.throttle",
					Conns: conns, Pipeline: shardPipeline, Duration: dur, Keys: shardKeys, Hot: p.hot, Seed: env.cfg.Seed,
				})
				if err != nil {
					return nil, fmt.Errorf("sluice --shards %d %s: %w", n, p.name, err)
				}
				row := combineShardRuns("sluice", fmt.Sprintf("%d shard%s", n, plural(n)), p.name, []Result{r})
				res.Rows = append(res.Rows, row)
				env.logf("  sluice %s %s: %.0f/s, %.2f us/decision", row.Setup, p.name, row.Throughput, row.CPUPerOp)
			}
			if err := env.stop(srv); err != nil {
				return nil, err
			}
		}
	} else {
		res.Notes = append(res.Notes, skippedSluice)
	}

	// Redis: one server, then two with the keys split by CRC32.
	var servers []*Server
	for range 2 {
		s, _, err := env.startRedis(ctx)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	for _, nServers := range []int{1, 2} {
		for _, p := range patterns {
			setup := fmt.Sprintf("%d server%s", nServers, plural(nServers))
			prefix := fmt.Sprintf("shards:%d:%s:", nServers, strings.ReplaceAll(p.name, " ", "-"))
			var cfgs []Config
			switch {
			case nServers == 1:
				cfgs = append(cfgs, Config{Target: redisTargetOf(servers[0]), Conns: conns})
			case p.hot > 0:
				// The client sends the one hot key to the server that owns it.
				owner := KeySplit{Of: nServers}.Owner(prefix + "hot")
				cfgs = append(cfgs, Config{Target: redisTargetOf(servers[owner]), Conns: conns})
			default:
				for i := range nServers {
					cfgs = append(cfgs, Config{Target: redisTargetOf(servers[i]), Conns: conns / nServers, Split: KeySplit{Of: nServers, Index: i}})
				}
			}
			results := make([]Result, len(cfgs))
			errs := make([]error, len(cfgs))
			var wg sync.WaitGroup
			for i, c := range cfgs {
				c.Mode, c.Pipeline, c.Duration, c.Keys, c.Hot, c.Seed, c.KeyPrefix = "lua-gcra", shardPipeline, dur, shardKeys, p.hot, env.cfg.Seed+uint64(i), prefix
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = Run(ctx, c)
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return nil, fmt.Errorf("redis %s %s: %w", setup, p.name, err)
				}
			}
			row := combineShardRuns("redis", setup, p.name, results)
			res.Rows = append(res.Rows, row)
			env.logf("  redis %s %s: %.0f/s, %.2f us/decision", setup, p.name, row.Throughput, row.CPUPerOp)
		}
	}
	return res, nil
}

func redisTargetOf(s *Server) Target { return Target{Kind: KindRedis, Addr: s.Addr, Pid: s.Pid()} }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// combineShardRuns adds up concurrent runs on several servers.
func combineShardRuns(server, setup, pattern string, runs []Result) shardRow {
	row := shardRow{Server: server, Setup: setup, Pattern: pattern}
	for _, r := range runs {
		row.Requests += r.Requests
		row.Errors += r.Errors
		row.Elapsed = max(row.Elapsed, r.Elapsed)
		row.Throughput += r.Throughput
		row.CPU += r.ServerCPU
		row.CPUUtil += r.ServerCPUUtil
		if r.Failure != "" && row.Failure == "" {
			row.Failure = r.Failure
		}
	}
	if row.Requests > 0 && row.CPU > 0 {
		row.CPUPerOp = float64(row.CPU) / float64(time.Microsecond) / float64(row.Requests)
	}
	if len(runs) > 0 {
		row.P50, row.P99 = runs[0].Latency.P50, runs[0].Latency.P99
	}
	return row
}

func (r *shardResult) report() (*ExperimentReport, error) {
	rep := &ExperimentReport{
		Seed: "spread: 283,791/s on one primary, 400,032/s on two (+41%, same laptop); hot key: 318,595/s on one shard, 299,301/s with two (no gain).",
		Setup: fmt.Sprintf("closed loop, %d connections, pipeline %d, %s per run, GCRA decisions (Sluice CL.THROTTLE; Redis the "+
			"GCRA Lua script) with 100 per s, burst 99. Uniform: %d keys chosen at random; hot key: every request on one key "+
			"(almost all limited, which is the cheap path on both). Sluice runs with --shards 1/2/4/8 in turn. Redis: one "+
			"redis-server, then two with the client splitting keys by CRC32 (half the connections to each); a hot key lives on "+
			"one of them. Server CPU is the server processes' CPU time over the run (all threads).",
			r.Conns, shardPipeline, fmtMs(r.Duration), shardKeys),
		Notes: append(r.Notes, "The load generator shares this machine's cores with the servers, so decisions/s is capped by the "+
			"client as much as by the server; CPU per decision is the figure that compares servers. Two Redis servers and the "+
			"generator on 2 cores compete for CPU."),
	}
	rep.CSV = [][]string{{"server", "setup", "keys", "requests", "elapsed_ns", "decisions_per_s", "server_cpu_ns", "server_cpu_us_per_decision", "server_cpu_cores", "p50_ns", "p99_ns", "errors", "failure"}}
	rep.Table = [][]string{{"server", "setup", "keys", "decisions/s", "server CPU per decision", "server CPU (cores)", "p50", "p99"}}
	var cats []string
	seenCat := map[string]int{}
	uni, hot := []float64{}, []float64{}
	cpuUni, cpuHot := []float64{}, []float64{}
	var parts []string
	for _, row := range r.Rows {
		rep.CSV = append(rep.CSV, []string{row.Server, row.Setup, row.Pattern, strconv.FormatInt(row.Requests, 10),
			strconv.FormatInt(int64(row.Elapsed), 10), fmtF(row.Throughput, 0), strconv.FormatInt(int64(row.CPU), 10),
			fmtF(row.CPUPerOp, 3), fmtF(row.CPUUtil, 3), strconv.FormatInt(int64(row.P50), 10), strconv.FormatInt(int64(row.P99), 10),
			strconv.FormatInt(row.Errors, 10), row.Failure})
		rep.Table = append(rep.Table, []string{row.Server, row.Setup, row.Pattern, fmtF(row.Throughput, 0),
			fmtF(row.CPUPerOp, 2) + " us", fmtF(row.CPUUtil, 2), formatLatency(row.P50), formatLatency(row.P99)})
		cat := row.Server + "\n" + row.Setup
		i, ok := seenCat[cat]
		if !ok {
			i = len(cats)
			seenCat[cat] = i
			cats = append(cats, cat)
			uni, hot, cpuUni, cpuHot = append(uni, 0), append(hot, 0), append(cpuUni, 0), append(cpuHot, 0)
		}
		if row.Pattern == "uniform" {
			uni[i], cpuUni[i] = row.Throughput, row.CPUPerOp
		} else {
			hot[i], cpuHot[i] = row.Throughput, row.CPUPerOp
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %s/s at %.2f us of server CPU per decision", row.Server, row.Setup, row.Pattern,
			fmtF(row.Throughput, 0), row.CPUPerOp))
	}
	rep.Summary = strings.Join(parts, "; ") + "."
	tp, err := barChart("Decisions per second (generator on the same 2 cores)", "decisions/s", cats,
		[]barSeries{{Name: "uniform keys", Values: uni}, {Name: "one hot key", Values: hot}}, 0, "")
	if err != nil {
		return nil, err
	}
	cpu, err := barChart("Server CPU per decision", "us of server CPU per decision", cats,
		[]barSeries{{Name: "uniform keys", Values: roundAll(cpuUni, 2)}, {Name: "one hot key", Values: roundAll(cpuHot, 2)}}, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts,
		Chart{File: "shards.png", Caption: "Decisions per second by shards/servers, uniform keys and one hot key", Plot: tp, Width: widthFor(len(cats))},
		Chart{File: "shards-cpu.png", Caption: "Server CPU per decision", Plot: cpu, Width: widthFor(len(cats))})
	return rep, nil
}

func roundAll(vs []float64, prec int) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i], _ = strconv.ParseFloat(fmtF(v, prec), 64)
	}
	return out
}
