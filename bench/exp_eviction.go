package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The eviction experiment: limiter state shares an instance with a cache,
// under memory pressure.
const (
	evictLimit      = 10
	evictWindowS    = 3600
	evictValueBytes = 1000
	evictBatch      = 500
)

// evictParams sizes one run.
type evictParams struct {
	Clients     int
	MaxMemory   int64 // bytes
	CacheWrites int
}

func evictSize(smoke bool) evictParams {
	if smoke {
		return evictParams{Clients: 500, MaxMemory: 4 << 20, CacheWrites: 16000}
	}
	return evictParams{Clients: 2000, MaxMemory: 8 << 20, CacheWrites: 32000}
}

// evictRow is one limiter family on one server.
type evictRow struct {
	Server, Family string
	Limiters       int
	Lost           int // limiters whose state is gone (any key of it)
	HalfLost       int // two-key state with exactly one key gone
	FreeQuota      int // units admitted to clients that had used their whole window
}

type evictCache struct {
	Server   string
	Writes   int
	Accepted int
	Refused  int   // -OOM replies
	Evicted  int64 // keys the server evicted (Redis INFO stats)
	Used     int64 // used_memory after the cache fill
}

type evictResult struct {
	Params evictParams
	Rows   []evictRow
	Caches []evictCache
	Notes  []string
}

func (r *evictResult) find(server, family string) *evictRow {
	for i := range r.Rows {
		if r.Rows[i].Server == server && r.Rows[i].Family == family {
			return &r.Rows[i]
		}
	}
	return nil
}

// evictLimiter is one limiter family: how to exhaust a client's window,
// how to tell whether its state survived, and one more request.
type evictLimiter struct {
	family  string
	keys    func(i int) []string
	request func(ctx context.Context, p redis.Pipeliner, i int) *redis.Cmd
	// admitted reads a request's reply.
	admitted func(cmd *redis.Cmd) (bool, error)
}

func decisionAdmitted(cmd *redis.Cmd) (bool, error) {
	d, err := parseDecision(cmd.Result())
	return !d.Limited, err
}

func runEviction(ctx context.Context, env *expEnv) (*evictResult, error) {
	res := &evictResult{Params: evictSize(env.smoke())}
	if env.quick {
		res.Params = evictParams{Clients: 200, MaxMemory: 3 << 20, CacheWrites: 8000}
	}
	if err := evictRedis(ctx, env, res); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if env.hasSluice() {
		if err := evictSluice(ctx, env, res); err != nil {
			return nil, fmt.Errorf("sluice: %w", err)
		}
	} else {
		res.Notes = append(res.Notes, skippedSluice)
	}
	return res, nil
}

func evictRedis(ctx context.Context, env *expEnv, res *evictResult) error {
	p := res.Params
	_, c, err := env.startRedis(ctx, "--maxmemory", strconv.FormatInt(p.MaxMemory, 10), "--maxmemory-policy", "allkeys-lru")
	if err != nil {
		return err
	}
	gcraSHA, err := loadLua(ctx, c, gcraScript)
	if err != nil {
		return err
	}
	fwSHA, err := loadLua(ctx, c, fwScript)
	if err != nil {
		return err
	}
	raceSHA, err := loadLua(ctx, c, raceScript)
	if err != nil {
		return err
	}
	limiters := []evictLimiter{
		{
			family: "GCRA (Lua)",
			keys:   func(i int) []string { return []string{"ev:gcra:" + strconv.Itoa(i)} },
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.EvalSha(ctx, gcraSHA, []string{"ev:gcra:" + strconv.Itoa(i)}, evictLimit-1, evictLimit, evictWindowS, 1)
			},
			admitted: decisionAdmitted,
		},
		{
			family: "fixed window (Lua INCR+PEXPIRE)",
			keys:   func(i int) []string { return []string{"ev:fw:" + strconv.Itoa(i)} },
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.EvalSha(ctx, fwSHA, []string{"ev:fw:" + strconv.Itoa(i)}, evictLimit, evictWindowS, 1)
			},
			admitted: decisionAdmitted,
		},
		{
			family: "two keys: count + reset (one Lua script)",
			keys: func(i int) []string {
				return []string{"ev:count:" + strconv.Itoa(i), "ev:reset:" + strconv.Itoa(i)}
			},
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.EvalSha(ctx, raceSHA, []string{"ev:count:" + strconv.Itoa(i), "ev:reset:" + strconv.Itoa(i)}, evictWindowS*1000)
			},
			admitted: func(cmd *redis.Cmd) (bool, error) {
				n, err := cmd.Int64()
				return n <= evictLimit, err
			},
		},
	}
	return evictRun(ctx, env, c, "redis", limiters, res)
}

func evictSluice(ctx context.Context, env *expEnv, res *evictResult) error {
	p := res.Params
	_, c, err := env.startSluice(ctx, "--maxmemory", strconv.FormatInt(p.MaxMemory, 10))
	if err != nil {
		return err
	}
	limiters := []evictLimiter{
		{
			family: "CL.THROTTLE",
			keys:   func(i int) []string { return []string{"ev:gcra:" + strconv.Itoa(i)} },
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.Do(ctx, "CL.THROTTLE", "ev:gcra:"+strconv.Itoa(i), evictLimit-1, evictLimit, evictWindowS, 1)
			},
			admitted: decisionAdmitted,
		},
		{
			family: "FW.CHECK",
			keys:   func(i int) []string { return []string{"ev:fw:" + strconv.Itoa(i)} },
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.Do(ctx, "FW.CHECK", "ev:fw:"+strconv.Itoa(i), evictLimit, evictWindowS, 1)
			},
			admitted: decisionAdmitted,
		},
		{
			family: "SW.CHECK",
			keys:   func(i int) []string { return []string{"ev:sw:" + strconv.Itoa(i)} },
			request: func(ctx context.Context, pipe redis.Pipeliner, i int) *redis.Cmd {
				return pipe.Do(ctx, "SW.CHECK", "ev:sw:"+strconv.Itoa(i), evictLimit, evictWindowS, 1)
			},
			admitted: decisionAdmitted,
		},
	}
	// Sluice's windows are on its own clock: freeze it mid-window so that
	// no window can end during the run.
	if _, err := freezeAtWindowStart(ctx, c, evictWindowS*1000, 1000); err != nil {
		return err
	}
	if err := c.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", 60_000).Err(); err != nil {
		return err
	}
	return evictRun(ctx, env, c, "sluice", limiters, res)
}

// evictRun exhausts every client's window, fills the cache, then counts
// what survived and what each client can get afresh.
func evictRun(ctx context.Context, env *expEnv, c *redis.Client, server string, limiters []evictLimiter, res *evictResult) error {
	p := res.Params
	// 1. Every client uses its whole window, then goes idle.
	for _, l := range limiters {
		for start := 0; start < p.Clients; start += evictBatch / evictLimit {
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for i := start; i < min(start+evictBatch/evictLimit, p.Clients); i++ {
				for range evictLimit {
					cmds = append(cmds, l.request(ctx, pipe, i))
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("%s: using the windows: %w", l.family, err)
			}
			for _, cmd := range cmds {
				if ok, err := l.admitted(cmd); err != nil || !ok {
					return fmt.Errorf("%s: a client's first %d requests were not all admitted (%v, %v)", l.family, evictLimit, ok, err)
				}
			}
		}
	}
	// 2. The cache workload.
	cache := evictCache{Server: server, Writes: p.CacheWrites}
	value := strings.Repeat("v", evictValueBytes)
	for start := 0; start < p.CacheWrites; start += evictBatch {
		pipe := c.Pipeline()
		var cmds []*redis.StatusCmd
		for j := start; j < min(start+evictBatch, p.CacheWrites); j++ {
			cmds = append(cmds, pipe.Set(ctx, "cache:"+strconv.Itoa(j), value, 0))
		}
		pipe.Exec(ctx) // errors are per command, below
		for _, cmd := range cmds {
			switch err := cmd.Err(); {
			case err == nil:
				cache.Accepted++
			case strings.HasPrefix(err.Error(), "OOM"):
				cache.Refused++
			default:
				return fmt.Errorf("cache SET: %w", err)
			}
		}
	}
	mem, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return err
	}
	cache.Used, _ = infoInt(mem, "used_memory")
	// Sluice never evicts, and may not report the counter.
	if stats, err := c.Info(ctx, "stats").Result(); err == nil {
		cache.Evicted, _ = infoInt(stats, "evicted_keys")
	}
	res.Caches = append(res.Caches, cache)

	// 3. What survived, before any further request can change it.
	for _, l := range limiters {
		row := evictRow{Server: server, Family: l.family, Limiters: p.Clients}
		for start := 0; start < p.Clients; start += evictBatch {
			pipe := c.Pipeline()
			var cmds [][]*redis.IntCmd
			for i := start; i < min(start+evictBatch, p.Clients); i++ {
				var per []*redis.IntCmd
				for _, k := range l.keys(i) {
					per = append(per, pipe.Exists(ctx, k))
				}
				cmds = append(cmds, per)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("%s: EXISTS: %w", l.family, err)
			}
			for _, per := range cmds {
				gone := 0
				for _, cmd := range per {
					if cmd.Val() == 0 {
						gone++
					}
				}
				if gone > 0 {
					row.Lost++
				}
				if gone > 0 && gone < len(per) {
					row.HalfLost++
				}
			}
		}
		res.Rows = append(res.Rows, row)
	}
	// 4. Every client asks again, up to limit+1 times: an intact limiter
	// admits nothing; a lost one hands out a fresh window.
	for li, l := range limiters {
		row := &res.Rows[len(res.Rows)-len(limiters)+li]
		for start := 0; start < p.Clients; start += evictBatch / (evictLimit + 1) {
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for i := start; i < min(start+evictBatch/(evictLimit+1), p.Clients); i++ {
				for range evictLimit + 1 {
					cmds = append(cmds, l.request(ctx, pipe, i))
				}
			}
			pipe.Exec(ctx)
			for _, cmd := range cmds {
				ok, err := l.admitted(cmd)
				if err != nil && !strings.HasPrefix(err.Error(), "OOM") {
					return fmt.Errorf("%s: asking again: %w", l.family, err)
				}
				if err == nil && ok {
					row.FreeQuota++
				}
			}
		}
	}
	env.logf("  %s: cache %d accepted, %d refused, %d evicted; limiters %+v", server, cache.Accepted, cache.Refused, cache.Evicted, res.Rows[len(res.Rows)-len(limiters):])
	return nil
}

// infoInt reads "name:value" from INFO output.
func infoInt(info, name string) (int64, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO has no " + name)
}

func (r *evictResult) report() (*ExperimentReport, error) {
	p := r.Params
	rep := &ExperimentReport{
		Seed: "counters of idle-but-mid-window clients are evicted, handing out fresh windows; two-key state can be half evicted (counter without reset, or reset without counter).",
		Setup: fmt.Sprintf("maxmemory %d MiB on both servers (Redis: allkeys-lru; Sluice: its only policy, noeviction). %d clients per "+
			"limiter family each use their whole window (%d per %d s) and go idle; then a cache writes %d values of %d bytes "+
			"(SET). Then: how many limiters lost state (EXISTS on each key), and how many units clients that had used their "+
			"whole window get when each asks %d more times (free quota; 0 when nothing was lost). Sluice's clock is frozen a "+
			"minute into the window so that no window ends during the run.",
			p.MaxMemory>>20, p.Clients, evictLimit, evictWindowS, p.CacheWrites, evictValueBytes, evictLimit+1),
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"server", "limiter", "limiters", "lost", "half_lost", "free_quota_units", "cache_writes", "cache_accepted", "cache_refused_oom", "keys_evicted", "used_memory"}}
	rep.Table = [][]string{{"server", "limiter", "limiters lost", "half lost (two keys)", "free quota handed out"}}
	var cats []string
	var lost, free []float64
	var parts []string
	for _, row := range r.Rows {
		var cache evictCache
		for _, c := range r.Caches {
			if c.Server == row.Server {
				cache = c
			}
		}
		rep.CSV = append(rep.CSV, []string{row.Server, row.Family, itoaI(row.Limiters), itoaI(row.Lost), itoaI(row.HalfLost),
			itoaI(row.FreeQuota), itoaI(cache.Writes), itoaI(cache.Accepted), itoaI(cache.Refused),
			strconv.FormatInt(cache.Evicted, 10), strconv.FormatInt(cache.Used, 10)})
		half := "-"
		if strings.HasPrefix(row.Family, "two keys") {
			half = fmt.Sprintf("%d of %d", row.HalfLost, row.Limiters)
		}
		rep.Table = append(rep.Table, []string{row.Server, row.Family,
			fmt.Sprintf("%d of %d (%s)", row.Lost, row.Limiters, pct(float64(row.Lost), float64(row.Limiters))), half,
			fmt.Sprintf("%d units", row.FreeQuota)})
		cats = append(cats, row.Server+"\n"+row.Family)
		lost = append(lost, float64(row.Lost))
		free = append(free, float64(row.FreeQuota)/evictLimit)
		parts = append(parts, fmt.Sprintf("%s %s lost %d of %d limiters (%d half) and handed out %d free units",
			row.Server, row.Family, row.Lost, row.Limiters, row.HalfLost, row.FreeQuota))
	}
	for _, c := range r.Caches {
		parts = append(parts, fmt.Sprintf("%s cache: %d of %d writes accepted, %d refused with OOM, %d keys evicted",
			c.Server, c.Accepted, c.Writes, c.Refused, c.Evicted))
	}
	rep.Summary = strings.Join(parts, "; ") + "."
	for i, c := range cats {
		cats[i] = strings.Replace(c, " (", "\n(", 1)
	}
	bar, err := barChart("Limiters lost under memory pressure", "clients", cats,
		[]barSeries{{Name: "limiters lost", Values: lost}, {Name: "fresh windows handed out (free units / limit)", Values: free}}, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "eviction.png", Caption: "Limiter state lost to eviction, per family", Plot: bar, Width: widthFor(len(cats))})
	return rep, nil
}
