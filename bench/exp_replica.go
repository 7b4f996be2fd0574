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
}

type lagResult struct {
	Trials int // per lag
	Rows   []lagRow
	Notes  []string
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
	// SluiceClusterSkipped is printed for the Sluice half until cluster
	// mode exists.
	SluiceClusterSkipped = "Sluice: cluster mode not built yet (skipped)"
)

func runReplicaLag(ctx context.Context, env *expEnv) (*lagResult, error) {
	trials, lags := lagTrials, lagLags
	if env.smoke() {
		trials, lags = lagTrialsSmoke, lagLagsSmoke
	}
	res := &lagResult{Trials: trials, Notes: []string{SluiceClusterSkipped}}
	env.logf("  %s", SluiceClusterSkipped)

	// No 5 s wait before the replica's first (diskless) sync.
	primarySrv, primary, err := env.startRedis(ctx, "--repl-diskless-sync-delay", "0")
	if err != nil {
		return nil, fmt.Errorf("primary: %w", err)
	}
	proxy, err := startDelayProxy(primarySrv.Addr)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	_, port, _ := strings.Cut(proxy.Addr(), ":")
	replicaSrv, replica, err := env.startRedis(ctx, "--replicaof", "127.0.0.1", port)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if err := waitReplicaUp(ctx, replica); err != nil {
		return nil, fmt.Errorf("replica %s: %w", replicaSrv.Addr, err)
	}
	sha, err := loadLua(ctx, primary, raceScript)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(env.cfg.Seed, 4))
	for _, lag := range lags {
		proxy.SetLag(lag)
		measured, err := measureReplicationLag(ctx, primary, replica)
		if err != nil {
			return nil, err
		}
		viaReplica := lagRow{Design: lagReplica, Lag: lag, Measured: measured}
		viaPrimary := lagRow{Design: lagPrimary, Lag: lag, Measured: measured}
		for trial := range trials {
			if err := lagTrial(ctx, rng, primary, replica, sha, fmt.Sprintf("lag:%d:%d:", lag.Milliseconds(), trial), &viaReplica, &viaPrimary); err != nil {
				return nil, fmt.Errorf("lag %v trial %d: %w", lag, trial, err)
			}
		}
		res.Rows = append(res.Rows, viaReplica, viaPrimary)
		env.logf("  lag %s (measured %s): replica-decided %d wrong of %d; primary-decided %d wrong of %d",
			fmtMs(lag), fmtMs(measured), viaReplica.Wrong, viaReplica.Probes, viaPrimary.Wrong, viaPrimary.Probes)
	}
	return res, nil
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
	rep := &ExperimentReport{
		Seed: "3 of 120 (2.50%) even on localhost; 44 of 120 (36.67%) at 50 ms; deciding and reporting from the primary's one atomic result: 0 at every lag.",
		Setup: fmt.Sprintf("a Redis primary and a replica (redis-server --replicaof) whose replication link runs through a loopback "+
			"TCP proxy that holds every byte from the primary back for the lag (0/10/25/50 ms; the measured time for a write to "+
			"show on the replica is in the table). A fixed window of %d kept as count + reset keys. Each trial: the client has "+
			"used its whole window (on both nodes, by WAIT); the window is forced over on the primary (reset moved into the past, "+
			"then the one-script rollover of experiment 2); the client then sends %d requests at random moments in the next %s. "+
			"Design A reads count and reset from the replica and rejects when the window is live and full, taking the increment "+
			"and the headers from the primary; a rejection is wrong when the primary still shows at least %d of %d left. Design B "+
			"decides and reports from the primary's one atomic script result. %d trials per lag.",
			lagLimit, lagProbes, fmtMs(lagProbeSpread), lagFreshAtLeast, lagLimit, r.Trials),
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"design", "lag_ms", "measured_replication_ms", "requests", "rejected", "wrong_rejections", "wrong_pct"}}
	rep.Table = [][]string{{"design", "lag", "measured lag", "requests", "rejected", "rejected with >= 80 left on the primary"}}
	var cats []string
	var a, b []float64
	var parts []string
	for _, row := range r.Rows {
		rep.CSV = append(rep.CSV, []string{row.Design, strconv.FormatInt(row.Lag.Milliseconds(), 10),
			fmtF(float64(row.Measured)/float64(time.Millisecond), 2), itoaI(row.Probes), itoaI(row.Rejected), itoaI(row.Wrong),
			fmtF(100*float64(row.Wrong)/float64(max(1, row.Probes)), 2)})
		rep.Table = append(rep.Table, []string{row.Design, fmtMs(row.Lag), fmtF(float64(row.Measured)/float64(time.Millisecond), 2) + " ms",
			itoaI(row.Probes), itoaI(row.Rejected), fmt.Sprintf("%d (%s)", row.Wrong, pct(float64(row.Wrong), float64(row.Probes)))})
		switch row.Design {
		case lagReplica:
			cats = append(cats, "lag "+fmtMs(row.Lag))
			a = append(a, float64(row.Wrong))
			parts = append(parts, fmt.Sprintf("at %s lag, deciding from the replica wrongly rejected %d of %d (%s)",
				fmtMs(row.Lag), row.Wrong, row.Probes, pct(float64(row.Wrong), float64(row.Probes))))
		case lagPrimary:
			b = append(b, float64(row.Wrong))
			parts[len(parts)-1] += fmt.Sprintf(", deciding from the primary %d", row.Wrong)
		}
	}
	rep.Summary = strings.Join(parts, "; ") + ". " + SluiceClusterSkipped + "."
	bar, err := barChart("Lagging replica: rejections while the primary had >= 80 of 100 left", "wrong rejections", cats,
		[]barSeries{{Name: "decide from replica", Values: a}, {Name: "decide from primary", Values: b}}, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "replica-lag.png", Caption: "Wrong rejections by replication lag", Plot: bar})
	return rep, nil
}
