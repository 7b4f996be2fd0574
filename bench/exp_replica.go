package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/faultproxy"
)

// The lagging-replica experiment: a client whose window has just rolled
// over on the primary asks again; the decision is read from a replica that
// has not seen the rollover yet.
const (
	lagLimit        = 100
	lagFreshAtLeast = 80 // a rejection is wrong when the primary shows this many left
	lagWindowMs     = 60000
	lagTrials       = 30
	lagTrialsSmoke  = 5
	lagProbes       = 4                      // requests per trial
	lagProbeSpread  = 100 * time.Millisecond // probes land uniformly in [0, spread) after the rollover
	lagMarkerProbes = 5
)

var (
	lagLags      = []time.Duration{0, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond}
	lagLagsSmoke = []time.Duration{0, 50 * time.Millisecond}
)

// lagRow is one decision design at one replication lag.
type lagRow struct {
	Design   string
	Lag      time.Duration
	Measured time.Duration // median time for a write on the primary to show on the replica
	Probes   int
	Rejected int
	// Wrong counts rejections whose fresh primary state still had at least
	// lagFreshAtLeast of lagLimit left.
	Wrong int
	// Stale counts requests at which the replica's (follower's) own state
	// still showed the used window, that is what deciding from it said:
	// for the Redis replica design these are its rejections.
	Stale int
	// Sluice only: decisions the lagging follower answered itself (a
	// follower never should) and decisions it redirected with -MOVED.
	FollowerAnswered, Redirected int
}

type lagResult struct {
	Trials int // per lag
	Lags   []time.Duration
	Sluice bool // the Sluice half ran
	// SluiceMarkers is the number of writes behind each measured lag of
	// the Sluice follower.
	SluiceMarkers int
	Rows          []lagRow
	Notes         []string
}

func (r *lagResult) find(design string, lag time.Duration) *lagRow {
	for i := range r.Rows {
		if r.Rows[i].Design == design && r.Rows[i].Lag == lag {
			return &r.Rows[i]
		}
	}
	return nil
}

const (
	lagReplica = "Redis: decide from the replica, increment and headers from the primary"
	lagPrimary = "Redis: decide and report from the primary's one atomic result"
)

func runReplicaLag(ctx context.Context, env *expEnv) (*lagResult, error) {
	trials, lags := lagTrials, lagLags
	if env.smoke() {
		trials, lags = lagTrialsSmoke, lagLagsSmoke
	}
	res := &lagResult{Trials: trials, Lags: lags}
	if err := runRedisLag(ctx, env, res); err != nil {
		return nil, err
	}
	if !env.hasSluice() {
		res.Notes = append(res.Notes, skippedSluice)
		env.logf("  %s", skippedSluice)
		return res, nil
	}
	if err := runSluiceLag(ctx, env, res); err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	res.Sluice = true
	return res, nil
}

// runRedisLag runs the Redis half at each lag, appends its rows and stops
// its servers.
func runRedisLag(ctx context.Context, env *expEnv, res *lagResult) error {
	// No 5 s wait before the replica's first (diskless) sync.
	primarySrv, primary, err := env.startRedis(ctx, "--repl-diskless-sync-delay", "0")
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	proxy, err := faultproxy.New(primarySrv.Addr)
	if err != nil {
		return err
	}
	defer proxy.Close()
	_, port, _ := strings.Cut(proxy.Addr(), ":")
	replicaSrv, replica, err := env.startRedis(ctx, "--replicaof", "127.0.0.1", port)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if err := waitReplicaUp(ctx, replica); err != nil {
		return fmt.Errorf("replica %s: %w", replicaSrv.Addr, err)
	}
	sha, err := loadLua(ctx, primary, raceScript)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(env.cfg.Seed, 4))
	for _, lag := range res.Lags {
		proxy.SetDelay(faultproxy.Replies, lag)
		measured, err := measureReplicationLag(ctx, primary, replica)
		if err != nil {
			return err
		}
		viaReplica := lagRow{Design: lagReplica, Lag: lag, Measured: measured}
		viaPrimary := lagRow{Design: lagPrimary, Lag: lag, Measured: measured}
		for trial := range res.Trials {
			if err := lagTrial(ctx, rng, primary, replica, sha, fmt.Sprintf("lag:%d:%d:", lag.Milliseconds(), trial), &viaReplica, &viaPrimary); err != nil {
				return fmt.Errorf("lag %v trial %d: %w", lag, trial, err)
			}
		}
		// Deciding from the replica rejects exactly when it still shows
		// the used window.
		viaReplica.Stale = viaReplica.Rejected
		res.Rows = append(res.Rows, viaReplica, viaPrimary)
		env.logf("  lag %s (measured %s): replica-decided %d wrong of %d; primary-decided %d wrong of %d",
			fmtMs(lag), fmtMs(measured), viaReplica.Wrong, viaReplica.Probes, viaPrimary.Wrong, viaPrimary.Probes)
	}
	// The Sluice half gets the machine to itself.
	return errors.Join(env.stop(replicaSrv), env.stop(primarySrv))
}

// waitReplicaUp waits (at most 15 s) for the replica's link to its primary.
func waitReplicaUp(ctx context.Context, replica *redis.Client) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := replica.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replication link not up after 15s: %v %s", err, info)
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
}

// measureReplicationLag writes a marker on the primary and times how long
// it takes to be readable on the replica, a few times; it returns the
// median.
func measureReplicationLag(ctx context.Context, primary, replica *redis.Client) (time.Duration, error) {
	var got []time.Duration
	for i := range lagMarkerProbes {
		val := strconv.Itoa(i) + ":" + strconv.FormatInt(time.Now().UnixNano(), 10)
		start := time.Now()
		if err := primary.Set(ctx, "lag:marker", val, 0).Err(); err != nil {
			return 0, err
		}
		for {
			v, err := replica.Get(ctx, "lag:marker").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, err
			}
			if v == val {
				got = append(got, time.Since(start))
				break
			}
			if time.Since(start) > 5*time.Second {
				return 0, errors.New("marker did not reach the replica within 5s")
			}
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	return got[len(got)/2], nil
}

// lagTrial: the client has used its whole window (on both nodes); the
// window is then forced over on the primary (its reset moved into the past,
// and the next request's atomic script rolls it over, as in the reset-race
// experiment), and the client sends lagProbes requests at random moments in
// the next lagProbeSpread. Each probe is decided both ways, on keys of
// their own.
func lagTrial(ctx context.Context, rng *rand.Rand, primary, replica *redis.Client, sha, prefix string, viaReplica, viaPrimary *lagRow) error {
	keys := func(design string) (string, string) { return prefix + design + ":count", prefix + design + ":reset" }
	rc, rr := keys("replica")
	pc, pr := keys("primary")
	now := time.Now().UnixMilli()
	if err := primary.MSet(ctx, rc, lagLimit, rr, now+lagWindowMs, pc, lagLimit, pr, now+lagWindowMs).Err(); err != nil {
		return err
	}
	// The exhausted window is on the replica before the rollover.
	if n, err := primary.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
		return fmt.Errorf("WAIT for the replica: %d, %v", n, err)
	}
	rollover := func(count, reset string) error {
		pipe := primary.Pipeline()
		pipe.Set(ctx, reset, 0, 0)
		pipe.EvalSha(ctx, sha, []string{count, reset}, lagWindowMs)
		_, err := pipe.Exec(ctx)
		return err
	}
	if err := rollover(rc, rr); err != nil {
		return err
	}
	if err := rollover(pc, pr); err != nil {
		return err
	}
	t0 := time.Now()
	offsets := make([]time.Duration, lagProbes)
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int64N(int64(lagProbeSpread)))
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	for _, off := range offsets {
		if err := sleepUntil(ctx, t0.Add(off)); err != nil {
			return err
		}
		// Decide from the replica.
		viaReplica.Probes++
		now := time.Now().UnixMilli()
		vals, err := replica.MGet(ctx, rc, rr).Result()
		if err != nil {
			return err
		}
		count, reset := intOr0(vals[0]), intOr0(vals[1])
		if reset > now && count >= lagLimit {
			viaReplica.Rejected++
			// The headers come from the primary: what it says is left.
			pv, err := primary.MGet(ctx, rc, rr).Result()
			if err != nil {
				return err
			}
			left := int64(lagLimit)
			if intOr0(pv[1]) > time.Now().UnixMilli() {
				left = lagLimit - intOr0(pv[0])
			}
			if left >= lagFreshAtLeast {
				viaReplica.Wrong++
			}
		} else if err := primary.EvalSha(ctx, sha, []string{rc, rr}, lagWindowMs).Err(); err != nil {
			return err
		}

		// Decide from the primary's one atomic result.
		viaPrimary.Probes++
		n, err := primary.EvalSha(ctx, sha, []string{pc, pr}, lagWindowMs).Int64()
		if err != nil {
			return err
		}
		if n > lagLimit {
			viaPrimary.Rejected++
			if lagLimit-min(n, lagLimit) >= lagFreshAtLeast {
				viaPrimary.Wrong++
			}
		}
	}
	return nil
}

// intOr0 reads an MGET value: a decimal string, or nil for a missing key.
func intOr0(v any) int64 {
	s, ok := v.(string)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (r *lagResult) report() (*ExperimentReport, error) {
	setup := fmt.Sprintf("Redis: a primary and a replica (redis-server --replicaof) whose replication link runs through a loopback "+
		"TCP proxy that holds every byte from the primary back for the lag (0/10/25/50 ms; the measured time for a write to "+
		"show on the replica is in the table). A fixed window of %d kept as count + reset keys. Each trial: the client has "+
		"used its whole window (on both nodes, by WAIT); the window is forced over on the primary (reset moved into the past, "+
		"then the one-script rollover of experiment 2); the client then sends %d requests at random moments in the next %s. "+
		"Design A reads count and reset from the replica and rejects when the window is live and full, taking the increment "+
		"and the headers from the primary; a rejection is wrong when the primary still shows at least %d of %d left. Design B "+
		"decides and reports from the primary's one atomic script result. %d trials per lag.",
		lagLimit, lagProbes, fmtMs(lagProbeSpread), lagFreshAtLeast, lagLimit, r.Trials)
	if r.Sluice {
		setup += fmt.Sprintf(" Sluice: a three-node cluster-mode group of sluice-server processes (Raft heartbeat and election "+
			"timeouts 1 s, lease 500 ms; every commit fsynced), one follower's Raft link behind a proxy that holds every byte "+
			"the leader sends it back for the lag (the follower announces the proxy as its Raft address; the leader dials its "+
			"followers, so the log and the commit index reach it that late; the measured lag is the median time for a SET on the "+
			"leader to be readable with READONLY GET on that follower, over %d writes). The same trials on FW.CHECK (%d per %d s): the "+
			"window used up on the leader and applied on the lagging follower (READONLY LIMIT.INFO shows 0 left), forced over "+
			"on the leader (LIMIT.RESET and the request that opens the new window, in one pipeline: one Raft entry), then %d requests at random moments in the "+
			"next %s, each FW.CHECK ... 1 MS sent to the lagging follower on a READONLY connection, as a client reading off a "+
			"replica would. The follower's -MOVED is followed to the leader (as go-redis ClusterClient and redis-cli -c do) and "+
			"the decision, remaining and reset are taken from that one reply; a rejection is wrong when LIMIT.INFO on the leader "+
			"right after still shows at least %d of %d left. Before each request the follower's own state is read (READONLY "+
			"LIMIT.INFO) to show whether it still held the used window.",
			r.SluiceMarkers, lagLimit, lagWindowMs/1000, lagProbes, fmtMs(lagProbeSpread), lagFreshAtLeast, lagLimit)
	}
	rep := &ExperimentReport{
		Seed:  "3 of 120 (2.50%) even on localhost; 44 of 120 (36.67%) at 50 ms; deciding and reporting from the primary's one atomic result: 0 at every lag.",
		Setup: setup,
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"design", "lag_ms", "measured_replication_ms", "requests", "rejected", "wrong_rejections", "wrong_pct",
		"replica_showed_used_window", "follower_answered", "redirected"}}
	rep.Table = [][]string{{"design", "lag", "measured lag", "requests", "replica/follower still showed the used window",
		"answered by the follower", "rejected", "rejected with >= 80 left on the primary/leader"}}
	na := func(applies bool, n int) string {
		if !applies {
			return ""
		}
		return itoaI(n)
	}
	var cats []string
	var replicaWrong, primaryWrong, sluiceWrong, replicaMs, sluiceMs []float64
	var parts []string
	for _, lag := range r.Lags {
		cats = append(cats, "lag "+fmtMs(lag))
		var part []string
		for _, design := range []string{lagReplica, lagPrimary, lagSluice} {
			row := r.find(design, lag)
			if row == nil {
				continue
			}
			ms := float64(row.Measured) / float64(time.Millisecond)
			stale, sluice := design != lagPrimary, design == lagSluice
			rep.CSV = append(rep.CSV, []string{row.Design, strconv.FormatInt(row.Lag.Milliseconds(), 10), fmtF(ms, 2),
				itoaI(row.Probes), itoaI(row.Rejected), itoaI(row.Wrong), fmtF(100*float64(row.Wrong)/float64(max(1, row.Probes)), 2),
				na(stale, row.Stale), na(sluice, row.FollowerAnswered), na(sluice, row.Redirected)})
			staleCell, answered := "-", "-"
			if stale {
				staleCell = fmt.Sprintf("%d (%s)", row.Stale, pct(float64(row.Stale), float64(row.Probes)))
			}
			if sluice {
				answered = fmt.Sprintf("%d (%d redirected with MOVED)", row.FollowerAnswered, row.Redirected)
			}
			rep.Table = append(rep.Table, []string{row.Design, fmtMs(row.Lag), fmtF(ms, 2) + " ms", itoaI(row.Probes), staleCell,
				answered, itoaI(row.Rejected), fmt.Sprintf("%d (%s)", row.Wrong, pct(float64(row.Wrong), float64(row.Probes)))})
			switch design {
			case lagReplica:
				replicaWrong, replicaMs = append(replicaWrong, float64(row.Wrong)), append(replicaMs, ms)
				part = append(part, fmt.Sprintf("at %s lag, deciding from the replica wrongly rejected %d of %d (%s)",
					fmtMs(row.Lag), row.Wrong, row.Probes, pct(float64(row.Wrong), float64(row.Probes))))
			case lagPrimary:
				primaryWrong = append(primaryWrong, float64(row.Wrong))
				part = append(part, fmt.Sprintf("deciding from the primary %d", row.Wrong))
			case lagSluice:
				sluiceWrong, sluiceMs = append(sluiceWrong, float64(row.Wrong)), append(sluiceMs, ms)
				part = append(part, fmt.Sprintf("Sluice %d of %d, with %d decisions answered by the lagging follower (%d redirected "+
					"with MOVED) while its own state still showed the used window at %d of them",
					row.Wrong, row.Probes, row.FollowerAnswered, row.Redirected, row.Stale))
			}
		}
		parts = append(parts, strings.Join(part, ", "))
	}
	rep.Summary = strings.Join(parts, "; ") + "."
	if !r.Sluice {
		rep.Summary += " " + skippedSluice + "."
	}
	series := []barSeries{{Name: "Redis: decide from replica", Values: replicaWrong}, {Name: "Redis: decide from primary", Values: primaryWrong}}
	if r.Sluice {
		series = append(series, barSeries{Name: "Sluice: to the follower, MOVED, leader decides", Values: sluiceWrong})
	}
	bar, err := barChart("Lagging replica: rejections while the primary had >= 80 of 100 left", "wrong rejections", cats, series, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "replica-lag.png", Caption: "Wrong rejections by replication lag", Plot: bar})
	if r.Sluice {
		lagBars, err := barChart("Time for a write to show on the lagging replica/follower (median)", "ms", cats,
			[]barSeries{{Name: "Redis replica", Values: replicaMs}, {Name: "Sluice follower", Values: sluiceMs}}, 0, "")
		if err != nil {
			return nil, err
		}
		rep.Charts = append(rep.Charts, Chart{File: "replica-lag-measured.png", Caption: "Measured replication lag by proxy lag", Plot: lagBars})
	}
	return rep, nil
}
