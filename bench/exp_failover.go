package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/replication"
)

// The failover experiment: a three-node group of real sluice-server
// processes under load, its Raft leader killed with SIGKILL (a crash: no
// leadership handed over, no connection closed cleanly), and the time until
// decisions are answered again, as the servers see it and as three clients
// see it: clientlib over go-redis's ClusterClient, and the ClusterClient
// alone, with its defaults and with the options that make it quickest.
// Each kill gets a fresh group (the killed node's directory goes with it).
// Across each kill it also counts the decisions on a key limited to
// failoverLimit an hour, which every loader hammers as the leader dies:
// acknowledged allows can never exceed the limit, and every unit the server
// charged was either acknowledged or had an unknown outcome.

const (
	failoverKills      = 20
	failoverKillsSmoke = 2

	failoverLoaders = 4 // goroutines sending decisions through a ClusterClient
	failoverCallers = 3 // goroutines calling the clientlib Limiter
	failoverDoers   = 2 // goroutines calling Do on each go-redis ClusterClient
	// failoverPause separates each measuring goroutine's calls (and a
	// loader's after an error): it sets their resolution, and keeps a loop
	// that fails at once (a refused dial) from spinning.
	failoverPause = time.Millisecond

	// failoverLimit is the limited key's limit per hour (SL.CHECK, exact).
	failoverLimit = 100
	// The leader is killed once the loaders have been told of this many
	// allows on the limited key, so that the decisions in flight at the
	// kill are on it, with units left.
	failoverAllowedBeforeKill = failoverLimit / 2

	failoverWarmup      = 500 * time.Millisecond // load before the kill
	failoverWarmupSmoke = 200 * time.Millisecond
	// failoverWait is the least any measure is waited for after a kill;
	// longer Raft timeouts in --sluice-args lengthen it (failoverWaitFor).
	failoverWait = 5 * time.Second
	// failoverWaitOut is how long the first kill of a full run waits for
	// go-redis with its defaults: longer than its 60 s slot-map reload.
	failoverWaitOut = 65 * time.Second
	// failoverExhaustWait bounds the wait, after the measures, for the
	// limited key to refuse (the whole limit charged).
	failoverExhaustWait = 3 * time.Second
	failoverGroupWait   = 30 * time.Second // a fresh group: 3 members, a leader
	failoverReadyWait   = 10 * time.Second // every client answered before the kill
	failoverCallTimeout = 2 * time.Second  // a loader's or prober's call
	failoverKillTries   = 3                // fresh groups for one kill (errNotLeaderKilled)
)

// errNotLeaderKilled: an election moved the leadership between the check
// and the SIGKILL, so a follower was killed. Rare, and only on a machine so
// loaded that heartbeats are late; the kill is run again.
var errNotLeaderKilled = errors.New("no new Raft term after the kill: the node killed was not the leader")

// The measures, in the report's order.
const (
	measureServer = iota
	measureClientlib
	measureGoRedisFast
	measureGoRedisDefaults
	numMeasures
)

var measureNames = [numMeasures]string{
	"server (first decision by a survivor)",
	"clientlib Limiter over ClusterClient (first Source=server)",
	"go-redis ClusterClient, fastest settings",
	"go-redis ClusterClient, defaults",
}

// measureShort names the measures in the CSV and the chart.
var measureShort = [numMeasures]string{"server", "clientlib", "go-redis fast", "go-redis defaults"}

// failoverKill is what one kill measured.
type failoverKill struct {
	Index             int
	Leader, NewLeader string // client addresses: the killed leader, the one elected
	// Took is each measure's time from the SIGKILL to its first success
	// among calls sent after it; -1 when none came within Waited.
	Took   [numMeasures]time.Duration
	Waited [numMeasures]time.Duration
	// Load: decisions the loaders were answered, and their errors, from the
	// start of load to its end.
	LoadAnswered, LoadErrors int64
	// FallbackAnswers counts clientlib answers from its failure policy
	// after the kill.
	FallbackAnswers int64
	Limited         limitedCount
}

// limitedCount is the limited key's accounting across one kill.
type limitedCount struct {
	Allowed, Refused int64 // acknowledged decisions
	// Unknown counts the errors: each may or may not have been charged.
	// Even a redirect or TRYAGAIN tells nothing, since go-redis returns
	// only its last attempt's error, and an earlier attempt may have
	// reached the old leader and been committed.
	Unknown int64
	// Charged is what the new leader holds after the run (the limit less
	// LIMIT.INFO's remaining; its entries count distinct timestamps).
	Charged int64
}

// holds reports whether the accounting is consistent: no more allows
// acknowledged than the limit, and every charged unit acknowledged or of
// unknown outcome.
func (c limitedCount) holds() bool {
	return c.Allowed <= failoverLimit && c.Allowed <= c.Charged && c.Charged <= c.Allowed+c.Unknown
}

type failoverResult struct {
	Args   []string // --sluice-args
	Wait   time.Duration
	Warmup time.Duration
	Kills  []failoverKill
	Notes  []string
	// DialFailures counts go-redis's "failed to dial" log lines.
	DialFailures int64
}

// goRedisLog takes go-redis's log lines during the experiment (it has one
// logger for the process). Each failed dial to the killed leader's address
// is logged: thousands of lines, which are counted; any other line goes to
// the experiment's log. logging.Enable puts go-redis's default logger back.
type goRedisLog struct {
	env          *expEnv
	dialFailures atomic.Int64
}

func (l *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "failed to dial") {
		l.dialFailures.Add(1)
		return
	}
	l.env.logf("  go-redis: %s", msg)
}

func runFailover(ctx context.Context, env *expEnv) (*failoverResult, error) {
	res := &failoverResult{Args: env.cfg.SluiceArgs, Wait: failoverWaitFor(env.cfg.SluiceArgs), Warmup: failoverWarmup}
	if !env.hasSluice() {
		res.Notes = append(res.Notes, skippedSluice)
		return res, nil
	}
	glog := &goRedisLog{env: env}
	redis.SetLogger(glog)
	defer logging.Enable()
	kills := failoverKills
	if env.smoke() {
		kills, res.Warmup = failoverKillsSmoke, failoverWarmupSmoke
	}
	if env.cfg.Kills > 0 {
		kills = env.cfg.Kills
	}
	for i := range kills {
		waits := [numMeasures]time.Duration{res.Wait, res.Wait, res.Wait, res.Wait}
		if i == 0 && !env.smoke() {
			waits[measureGoRedisDefaults] = max(res.Wait, failoverWaitOut)
		}
		k, err := runFailoverKill(ctx, env, i, waits, res.Warmup)
		for try := 1; errors.Is(err, errNotLeaderKilled) && try < failoverKillTries; try++ {
			env.logf("  kill %d: %v; again, with a fresh group", i+1, err)
			k, err = runFailoverKill(ctx, env, i, waits, res.Warmup)
		}
		if err != nil {
			return nil, fmt.Errorf("kill %d: %w", i+1, err)
		}
		res.Kills = append(res.Kills, k)
		res.DialFailures = glog.dialFailures.Load()
		var took []string
		for m := range numMeasures {
			took = append(took, measureShort[m]+" "+fmtTook(k.Took[m], k.Waited[m]))
		}
		env.logf("  kill %d: leader %s killed, %s elected; %s; limited key: %d allowed, %d refused, %d unknown, %d charged",
			i+1, k.Leader, k.NewLeader, strings.Join(took, ", "), k.Limited.Allowed, k.Limited.Refused, k.Limited.Unknown, k.Limited.Charged)
	}
	return res, nil
}

// failoverWaitFor is how long a kill waits for each measure: failoverWait,
// or ten times the longest Raft timeout given in args (detection takes up
// to two heartbeat timeouts, an election one or two election timeouts).
func failoverWaitFor(args []string) time.Duration {
	wait := failoverWait
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		switch name {
		case "cluster-heartbeat-timeout", "cluster-election-timeout", "cluster-lease-timeout":
			if d, err := time.ParseDuration(val); err == nil {
				wait = max(wait, 10*d)
			}
		}
	}
	return wait
}

// killClock times one kill: the calls that count are those sent after
// the SIGKILL.
type killClock struct {
	base   time.Time
	killed atomic.Int64 // ns since base of the SIGKILL; 0 before it
}

func (c *killClock) since(t time.Time) int64 { return max(1, int64(t.Sub(c.base))) }

// afterKill reports whether a call sent at sent was sent after the kill.
func (c *killClock) afterKill(sent time.Time) bool {
	k := c.killed.Load()
	return k > 0 && c.since(sent) >= k
}

// firstSuccess is one measure: whether its client succeeded before the
// kill (it works), and when the first call sent after the kill succeeded.
type firstSuccess struct {
	clock *killClock
	ready atomic.Bool
	at    atomic.Int64 // ns since the clock's base; 0: not yet
	// addr is who answered first (the server probes).
	addr atomic.Pointer[string]
}

func (f *firstSuccess) succeeded(sent, done time.Time, addr string) {
	k := f.clock.killed.Load()
	if k == 0 {
		f.ready.Store(true)
		return
	}
	if f.clock.since(sent) < k {
		return // sent before the kill, answered after it
	}
	if f.at.CompareAndSwap(0, f.clock.since(done)) {
		f.addr.Store(&addr)
	}
}

// took returns the time from the kill to the first success, or -1.
func (f *firstSuccess) took() time.Duration {
	at := f.at.Load()
	if at == 0 {
		return -1
	}
	return time.Duration(at - f.clock.killed.Load())
}

// newFailoverLimiter builds the clientlib Limiter the experiment measures,
// over the ClusterClient clientlib.NewClusterClient builds, seeded with
// every node, every other setting clientlib's defaults (FailFallback, a
// 50 ms timeout).
func newFailoverLimiter(addrs []string) (*clientlib.Limiter, io.Closer) {
	cc := clientlib.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	return clientlib.NewLimiter(cc), cc
}

// seedAddrs copies a seed list for one ClusterClient. go-redis (v9.23)
// keeps ClusterOptions.Addrs as its list of known addresses and appends
// the nodes it learns to it: two clients given one slice with room to
// spare write the same array (a data race, and each sees the other's
// nodes). A copy without spare capacity is the client's alone.
func seedAddrs(addrs []string) []string { return slices.Clip(slices.Clone(addrs)) }

// newGoRedisDefaults is go-redis's ClusterClient as its README builds it.
func newGoRedisDefaults(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: seedAddrs(addrs)})
}

// newGoRedisFast is the ClusterClient with the options that get it past a
// dead leader soonest (go-redis v9.23, osscluster.go). A command that
// fails to reach the leader it has in its slot map neither follows a
// redirect (a dead node sends none) nor reloads the map: it is retried on
// the same node, and the map names the dead node until it is reloaded,
// which happens on a MOVED, ASK or READONLY reply, or when a command finds
// the map older than ClusterStateReloadInterval (60 s by default), and at
// most once per 200 ms.
func newGoRedisFast(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seedAddrs(addrs),
		// Below go-redis's 200 ms between reloads: a reload as often as it
		// allows, while commands flow.
		ClusterStateReloadInterval: 50 * time.Millisecond,
		// One dial per attempt: the default 5, 100 ms apart, spend 400 ms
		// on a refused dial, both in a command and in a reload that asks
		// the dead node for the slot map.
		DialerRetries: 1,
		DialTimeout:   200 * time.Millisecond,
		// Between a command's attempts 1-4 ms rather than 10 ms to 1 s.
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 4 * time.Millisecond,
		// MaxRetries stays -1 (the node client's own retries would dial
		// the same dead address), and ReadTimeout at 5 s: a survivor holds
		// a decision while it has no leader (up to an election timeout)
		// and answers it when one is elected, which is what is waited for.
		ContextTimeoutEnabled: true,
	})
}

// failoverGroup is one fresh group, its clients, and what they count.
type failoverGroup struct {
	env     *expEnv
	nodes   []*Server
	admin   []*redis.Client // one per node, for CLUSTER INFO
	addrs   []string
	closers []io.Closer // clients made for this kill
}

func (g *failoverGroup) keep(c io.Closer) { g.closers = append(g.closers, c) }

// start starts three nodes, the first bootstrapping the group and the
// others joining it, and waits until all three are members with a leader.
func (g *failoverGroup) start(ctx context.Context) error {
	cluster := []string{"--cluster-enabled", "yes"}
	for i := range 3 {
		args := slices.Concat(cluster, []string{"--cluster-bootstrap", "yes"})
		if i > 0 {
			args = slices.Concat(cluster, []string{"--cluster-join", g.addrs[0]})
		}
		s, c, err := g.env.startSluice(ctx, args...)
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		g.nodes, g.admin, g.addrs = append(g.nodes, s), append(g.admin, c), append(g.addrs, s.Addr)
	}
	_, _, err := g.waitHealthy(ctx)
	return err
}

// waitHealthy waits (at most failoverGroupWait) until every node reports
// cluster_state:ok with three known nodes and exactly one of them leads,
// and returns the leader's index and its Raft term.
func (g *failoverGroup) waitHealthy(ctx context.Context) (int, uint64, error) {
	deadline := time.Now().Add(failoverGroupWait)
	for {
		leader, last := -1, ""
		var term uint64
		healthy := true
		for i, c := range g.admin {
			info, err := clusterInfo(ctx, c)
			if err != nil {
				healthy, last = false, fmt.Sprintf("%s: %v", g.addrs[i], err)
				break
			}
			if info["cluster_state"] != "ok" || info["cluster_known_nodes"] != "3" {
				healthy, last = false, fmt.Sprintf("%s: state %s, known nodes %s", g.addrs[i], info["cluster_state"], info["cluster_known_nodes"])
				break
			}
			switch info["raft_state"] {
			case "Leader":
				if leader >= 0 {
					healthy, last = false, "two leaders"
				}
				leader = i
				if term, err = groupZeroTerm(ctx, c); err != nil {
					healthy, last = false, fmt.Sprintf("%s: %v", g.addrs[i], err)
				}
			case "Follower":
			default:
				healthy, last = false, fmt.Sprintf("%s: raft_state %s", g.addrs[i], info["raft_state"])
			}
		}
		if healthy && leader >= 0 {
			return leader, term, nil
		}
		if time.Now().After(deadline) {
			return -1, 0, fmt.Errorf("group not healthy within %v (%s)", failoverGroupWait, last)
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return -1, 0, err
		}
	}
}

// leaderInfo reads a LIMIT.INFO field on the leader, starting at addr and
// following redirects: on a loaded machine the leadership can move again
// after the failover.
func (g *failoverGroup) leaderInfo(ctx context.Context, addr, key, field string) (int64, error) {
	deadline := time.Now().Add(failoverGroupWait)
	for {
		i := slices.Index(g.addrs, addr)
		if i < 0 {
			return 0, fmt.Errorf("redirected to %s, which is not a node of this group", addr)
		}
		cmd := g.admin[i].Do(ctx, "LIMIT.INFO", key)
		to, moved := movedTo(cmd.Err())
		switch {
		case moved:
			addr = to
		case !retryable(cmd.Err()):
			return infoField(cmd, field)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("LIMIT.INFO: no leader answered within %v: %w", failoverGroupWait, cmd.Err())
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return 0, err
		}
	}
}

// close stops the clients and the nodes still running.
func (g *failoverGroup) close() error {
	for _, c := range g.closers {
		c.Close()
	}
	for _, c := range g.admin {
		c.Close()
	}
	var errs []error
	for _, s := range g.nodes {
		if err := g.env.stop(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kill9 kills the server with SIGKILL, as a crash would, and waits until it
// is reaped. Close does nothing afterwards.
func (s *Server) kill9() error {
	killed := false
	var err error
	s.stopOnce.Do(func() {
		killed = true
		if err = s.cmd.Process.Signal(syscall.SIGKILL); err == nil {
			<-s.exited
		}
	})
	if !killed {
		return fmt.Errorf("%s pid %d was already stopped", s.Name, s.Pid())
	}
	return err
}

// failoverRun is one kill's goroutines and their counts.
type failoverRun struct {
	clock    killClock
	stop     atomic.Bool // the measuring goroutines end
	stopLoad atomic.Bool // the loaders end (last, so the load spans all)
	wg, load sync.WaitGroup
	measures [numMeasures]*firstSuccess

	hammer  atomic.Bool // the loaders send the limited key only
	limited struct {
		allowed, refused, unknown atomic.Int64
		refusedAfterKill          atomic.Bool
	}
	loadAnswered, loadErrors atomic.Int64
	fallbackAnswers          atomic.Int64

	errMu    sync.Mutex
	firstErr error // an error that ends the run (a client's unexpected error)
}

func (r *failoverRun) fail(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.firstErr == nil {
		r.firstErr = err
	}
}

func (r *failoverRun) err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.firstErr
}

func (r *failoverRun) ready() bool {
	for _, m := range r.measures[measureClientlib:] {
		if !m.ready.Load() {
			return false
		}
	}
	return true
}

// Decisions the experiment sends: a fixed window that never limits (the
// probes and the load) and the limited key (an exact sliding log).
func neverLimited(key string) []any { return []any{"FW.CHECK", key, 1_000_000_000, 3600, 1} }
func limitedDecision(key string) []any {
	return []any{"SL.CHECK", key, failoverLimit, 3600, 1}
}

// runFailoverKill starts a group, puts it under load, kills its leader and
// measures.
func runFailoverKill(ctx context.Context, env *expEnv, index int, waits [numMeasures]time.Duration, warmup time.Duration) (k failoverKill, err error) {
	k = failoverKill{Index: index + 1, Waited: waits}
	g := &failoverGroup{env: env}
	defer func() {
		if cerr := g.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if err := g.start(ctx); err != nil {
		return k, err
	}
	r := &failoverRun{clock: killClock{base: time.Now()}}
	for m := range r.measures {
		r.measures[m] = &firstSuccess{clock: &r.clock}
	}
	// Every key carries a hash tag of slot 0, so that with several Raft
	// groups (--sluice-args "--cluster-groups 3") the load is on group 0,
	// the one whose leader is killed (CLUSTER INFO's raft_state and INFO
	// replication describe group 0).
	prefix := fmt.Sprintf("{%s}failover:%d:", slotZeroTag, index+1)
	limitedKey := prefix + "limited"

	// The load: a few loaders over a ClusterClient of their own.
	loadClient := newGoRedisFast(g.addrs)
	g.keep(loadClient)
	for w := range failoverLoaders {
		r.load.Add(1)
		go func() {
			defer r.load.Done()
			r.loader(ctx, loadClient, prefix+"load:"+strconv.Itoa(w)+":", limitedKey)
		}()
	}
	// clientlib.
	limiter, closer := newFailoverLimiter(g.addrs)
	g.keep(closer)
	for w := range failoverCallers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.callClientlib(ctx, limiter, prefix+"clientlib:"+strconv.Itoa(w))
		}()
	}
	// go-redis alone, both ways.
	for _, v := range []struct {
		measure int
		client  *redis.ClusterClient
	}{{measureGoRedisFast, newGoRedisFast(g.addrs)}, {measureGoRedisDefaults, newGoRedisDefaults(g.addrs)}} {
		g.keep(v.client)
		for w := range failoverDoers {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.callGoRedis(ctx, v.client, r.measures[v.measure], fmt.Sprintf("%s%s:%d", prefix, measureShort[v.measure], w))
			}()
		}
	}
	defer func() {
		// Measuring goroutines first, then the load: every goroutine has
		// ended before the clients close.
		r.stop.Store(true)
		r.wg.Wait()
		r.stopLoad.Store(true)
		r.load.Wait()
	}()

	// Every client answered before the kill, and the load ran a while.
	loadStart := time.Now()
	readyBy := loadStart.Add(failoverReadyWait)
	for !r.ready() || time.Since(loadStart) < warmup {
		if err := r.err(); err != nil {
			return k, err
		}
		if time.Now().After(readyBy) {
			return k, fmt.Errorf("the clients were not all answered within %v of the load's start", failoverReadyWait)
		}
		if err := sleepUntil(ctx, time.Now().Add(5*time.Millisecond)); err != nil {
			return k, err
		}
	}

	// Whoever leads now is killed; a probe per survivor, on a connection of
	// its own, ready before the kill.
	leader, term, err := g.waitHealthy(ctx)
	if err != nil {
		return k, err
	}
	k.Leader = g.addrs[leader]
	for i, addr := range g.addrs {
		if i == leader {
			continue
		}
		probe := redis.NewClient(&redis.Options{
			Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: failoverCallTimeout, WriteTimeout: failoverCallTimeout,
			ContextTimeoutEnabled: true,
		})
		g.keep(probe)
		var answered atomic.Bool
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.probe(ctx, probe, addr, prefix+"probe:"+addr, &answered)
		}()
		for !answered.Load() {
			if time.Now().After(readyBy) {
				return k, fmt.Errorf("survivor %s did not answer a probe before the kill", addr)
			}
			if err := sleepUntil(ctx, time.Now().Add(time.Millisecond)); err != nil {
				return k, err
			}
		}
	}

	// The loaders turn to the limited key; the kill comes once half its
	// limit has been acknowledged, so that what is in flight has units left.
	r.hammer.Store(true)
	for r.limited.allowed.Load() < failoverAllowedBeforeKill {
		if time.Now().After(readyBy) {
			return k, fmt.Errorf("only %d allows on the limited key before the kill", r.limited.allowed.Load())
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Microsecond)); err != nil {
			return k, err
		}
	}
	r.clock.killed.Store(r.clock.since(time.Now()))
	if err := g.nodes[leader].kill9(); err != nil {
		return k, err
	}
	killedAt := r.clock.base.Add(time.Duration(r.clock.killed.Load()))
	env.logf("  kill %d: SIGKILL to the leader %s (pid %d)", index+1, k.Leader, g.nodes[leader].Pid())

	// Each measure until it succeeds or its wait is over.
	for {
		if err := r.err(); err != nil {
			return k, err
		}
		pending := false
		for m, f := range r.measures {
			if f.at.Load() == 0 && time.Since(killedAt) < waits[m] {
				pending = true
			}
		}
		if !pending {
			break
		}
		if err := sleepUntil(ctx, time.Now().Add(2*time.Millisecond)); err != nil {
			return k, err
		}
	}
	for m, f := range r.measures {
		k.Took[m] = f.took()
	}
	if k.Took[measureServer] < 0 {
		return k, fmt.Errorf("no survivor answered a decision within %v of the kill", waits[measureServer])
	}
	k.NewLeader = *r.measures[measureServer].addr.Load()
	newLeader := g.admin[slices.Index(g.addrs, k.NewLeader)]
	newTerm, err := groupZeroTerm(ctx, newLeader)
	if err != nil {
		return k, fmt.Errorf("INFO replication on the new leader: %w", err)
	}
	if newTerm <= term {
		return k, fmt.Errorf("%w (term %d before, %d after)", errNotLeaderKilled, term, newTerm)
	}

	// The rest of the limit is used, then the measuring ends.
	exhaustBy := time.Now().Add(failoverExhaustWait)
	for !r.limited.refusedAfterKill.Load() && time.Now().Before(exhaustBy) {
		if err := sleepUntil(ctx, time.Now().Add(2*time.Millisecond)); err != nil {
			return k, err
		}
	}
	r.stop.Store(true)
	r.wg.Wait()
	r.stopLoad.Store(true)
	r.load.Wait()
	if err := r.err(); err != nil {
		return k, err
	}

	k.Limited = limitedCount{
		Allowed: r.limited.allowed.Load(), Refused: r.limited.refused.Load(), Unknown: r.limited.unknown.Load(),
	}
	k.LoadAnswered, k.LoadErrors = r.loadAnswered.Load(), r.loadErrors.Load()
	k.FallbackAnswers = r.fallbackAnswers.Load()
	// What the leader charged, read from it directly.
	remaining, err := g.leaderInfo(ctx, k.NewLeader, limitedKey, "remaining")
	if err != nil {
		return k, fmt.Errorf("%s: %w", limitedKey, err)
	}
	k.Limited.Charged = failoverLimit - remaining
	return k, nil
}

// loader sends decisions one after another: on its own keys, never
// limited, until the run turns to the limited key, then on it.
func (r *failoverRun) loader(ctx context.Context, cc *redis.ClusterClient, keyPrefix, limitedKey string) {
	for i := 0; !r.stopLoad.Load() && ctx.Err() == nil; i++ {
		hammer := r.hammer.Load()
		args := neverLimited(keyPrefix + strconv.Itoa(i%64))
		if hammer {
			args = limitedDecision(limitedKey)
		}
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, failoverCallTimeout)
		v, err := cc.Do(cctx, args...).Result()
		cancel()
		d, err := parseDecision(v, err)
		if err == nil {
			r.loadAnswered.Add(1)
		} else {
			r.loadErrors.Add(1)
		}
		if hammer {
			switch {
			case err == nil && !d.Limited:
				r.limited.allowed.Add(1)
			case err == nil:
				r.limited.refused.Add(1)
				if r.clock.afterKill(sent) {
					r.limited.refusedAfterKill.Store(true)
				}
			default:
				r.limited.unknown.Add(1)
			}
		}
		if err != nil {
			sleepUntil(ctx, time.Now().Add(failoverPause))
		}
	}
}

// callClientlib calls the Limiter as an application would, and records
// the first decision the server made after the kill.
func (r *failoverRun) callClientlib(ctx context.Context, l *clientlib.Limiter, key string) {
	limit := clientlib.PerSecond(1_000_000)
	f := r.measures[measureClientlib]
	for !r.stop.Load() && ctx.Err() == nil {
		sent := time.Now()
		res, err := l.Allow(ctx, key, limit)
		switch {
		case err != nil:
			// The default policy (FailFallback) answers every failure;
			// an error is a bad argument or a reply nobody expected.
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("clientlib Allow: %w", err))
			}
			return
		case res.Source == clientlib.FromServer:
			f.succeeded(sent, time.Now(), "")
		case r.clock.afterKill(sent):
			r.fallbackAnswers.Add(1)
		}
		sleepUntil(ctx, time.Now().Add(failoverPause))
	}
}

// callGoRedis sends decisions through a ClusterClient with Do and records
// the first one answered after the kill.
func (r *failoverRun) callGoRedis(ctx context.Context, cc *redis.ClusterClient, f *firstSuccess, key string) {
	for !r.stop.Load() && ctx.Err() == nil {
		sent := time.Now()
		if _, err := parseDecision(cc.Do(ctx, neverLimited(key)...).Result()); err == nil {
			f.succeeded(sent, time.Now(), "")
		}
		sleepUntil(ctx, time.Now().Add(failoverPause))
	}
}

// probe sends a decision to one survivor at a time on its own connection
// and records the first decision it answers after the kill (only the new
// leader does; a follower redirects).
func (r *failoverRun) probe(ctx context.Context, c *redis.Client, addr, key string, answered *atomic.Bool) {
	f := r.measures[measureServer]
	for !r.stop.Load() && ctx.Err() == nil {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, failoverCallTimeout)
		v, err := c.Do(cctx, neverLimited(key)...).Result()
		cancel()
		var rerr redis.Error
		if err == nil || errors.As(err, &rerr) {
			answered.Store(true)
		}
		if _, err := parseDecision(v, err); err == nil {
			f.succeeded(sent, time.Now(), addr)
		}
		sleepUntil(ctx, time.Now().Add(failoverPause))
	}
}

// fmtTook formats a measured time, or "> wait" when none came.
func fmtTook(d, waited time.Duration) string {
	if d < 0 {
		return "> " + fmtSeconds(waited)
	}
	return fmtMs(d.Round(time.Millisecond))
}

func fmtSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

// nearestRank returns the p-quantile of ds by nearest rank; a missing value
// (-1: none within the wait) sorts last, and is returned as -1.
func nearestRank(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool {
		if (s[i] < 0) != (s[j] < 0) {
			return s[j] < 0
		}
		return s[i] < s[j]
	})
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (r *failoverResult) took(m int, only func(failoverKill) bool) ([]time.Duration, time.Duration) {
	var ds []time.Duration
	var waited time.Duration
	for _, k := range r.Kills {
		if only != nil && !only(k) {
			continue
		}
		ds = append(ds, k.Took[m])
		waited = max(waited, k.Waited[m])
	}
	return ds, waited
}

func (r *failoverResult) report() (*ExperimentReport, error) {
	args := fmt.Sprintf("none (the Raft defaults of this tree's server: heartbeat and election timeouts %v, lease %v)",
		replication.DefaultHeartbeatTimeout, replication.DefaultLeaderLease)
	if len(r.Args) > 0 {
		args = "`" + strings.Join(r.Args, " ") + "`"
	}
	rep := &ExperimentReport{
		Seed: "the cluster scale-out issue: after kill -9 of the leader a survivor answered in 1.42 s; in-process, " +
			"10 fresh groups with 500 ms timings: median 741 ms, max 1,479 ms.",
		Setup: fmt.Sprintf("%d kills, each of a fresh three-node group of sluice-server processes on loopback "+
			"(--cluster-enabled yes, the first --cluster-bootstrap yes, the others --cluster-join it; --sluice-args: %s). "+
			"Under load (%d goroutines sending decisions one after another through a go-redis ClusterClient, started %s "+
			"before the kill), the Raft leader is sent SIGKILL once the loaders have been told of %d allows on a key "+
			"limited to %d an hour (SL.CHECK), which they then all hammer. Measured from the SIGKILL, over calls sent "+
			"after it: server, the first decision (FW.CHECK) a survivor answers, each survivor probed on a connection of "+
			"its own every ~1 ms; clientlib, the first Result with Source server from a Limiter over a ClusterClient "+
			"seeded with all three nodes (ContextTimeoutEnabled, everything else default: FailFallback, 50 ms timeout), "+
			"%d goroutines calling Allow ~1 ms apart; go-redis, the first decision Do returns from a ClusterClient with "+
			"its defaults and one with ClusterStateReloadInterval 50 ms, DialerRetries 1, retry backoff 1-4 ms, "+
			"ContextTimeoutEnabled, %d goroutines each ~1 ms apart. Each measure is waited for up to %s after the kill%s. "+
			"Percentiles are by nearest rank over the kills.",
			len(r.Kills), args, failoverLoaders, fmtMs(r.Warmup), failoverAllowedBeforeKill, failoverLimit,
			failoverCallers, failoverDoers, fmtSeconds(r.Wait), map[bool]string{true: fmt.Sprintf("; go-redis with its "+
				"defaults up to %s on the first kill", fmtSeconds(failoverWaitOut))}[r.waitedOut()]),
		Notes: r.Notes,
	}
	if len(r.Kills) == 0 {
		rep.Summary = "Not run."
		rep.Table = [][]string{{"measure", "median", "p90", "max"}}
		rep.CSV = [][]string{{"kill"}}
		return rep, nil
	}
	rep.Table = [][]string{{"measure", "median", "p90", "max", "answered within the wait"}}
	var parts []string
	series := []barSeries{{Name: "median"}, {Name: "p90"}, {Name: "max"}}
	var cats []string
	for m := range numMeasures {
		// The kill that waited go-redis's defaults out has a row of its own.
		ds, waited := r.took(m, func(k failoverKill) bool { return k.Waited[m] == r.Wait })
		med, p90, mx := nearestRank(ds, 0.5), nearestRank(ds, 0.9), nearestRank(ds, 1)
		answered := 0
		for _, d := range ds {
			if d >= 0 {
				answered++
			}
		}
		wait := r.Wait
		rep.Table = append(rep.Table, []string{measureNames[m], fmtTook(med, wait), fmtTook(p90, wait), fmtTook(mx, waited),
			fmt.Sprintf("%d of %d", answered, len(ds))})
		parts = append(parts, fmt.Sprintf("%s median %s, p90 %s, max %s", measureShort[m], fmtTook(med, wait), fmtTook(p90, wait), fmtTook(mx, waited)))
		cat := measureShort[m]
		if mx < 0 {
			cat += "\n(none in " + fmtSeconds(wait) + ":\ndrawn at the wait)"
		}
		cats = append(cats, cat)
		for i, d := range []time.Duration{med, p90, mx} {
			if d < 0 {
				d = wait // at least that long
			}
			series[i].Values = append(series[i].Values, float64(d.Round(time.Millisecond).Milliseconds()))
		}
	}
	if r.waitedOut() {
		k := r.Kills[0]
		rep.Table = append(rep.Table, []string{"go-redis ClusterClient, defaults, first kill waited out",
			fmtTook(k.Took[measureGoRedisDefaults], k.Waited[measureGoRedisDefaults]), "", "", "1 kill"})
		parts = append(parts, "go-redis defaults on the first kill "+fmtTook(k.Took[measureGoRedisDefaults], k.Waited[measureGoRedisDefaults]))
	}

	var held, allowed, charged, unknown, fallback int64
	for _, k := range r.Kills {
		if k.Limited.holds() {
			held++
		}
		allowed += k.Limited.Allowed
		charged += k.Limited.Charged
		unknown += k.Limited.Unknown
		fallback += k.FallbackAnswers
	}
	rep.Summary = strings.Join(parts, "; ") + fmt.Sprintf(". Limited key (%d an hour): acknowledged allowed <= limit and "+
		"acknowledged <= charged <= acknowledged + unknown outcome in %d of %d kills (over all kills %d acknowledged, %d charged, %d unknown).",
		failoverLimit, held, len(r.Kills), allowed, charged, unknown)
	rep.Notes = append(rep.Notes,
		"go-redis's ClusterClient (v9.23) reloads its slot map on a MOVED, ASK or READONLY reply, or when a command finds "+
			"it older than ClusterStateReloadInterval (60 s by default), never on a dial or connection error; a dead leader "+
			"sends no MOVED, so with the defaults every command goes to the dead address until the periodic reload. A "+
			"client's map is as old as its last reload, so in a long-running process the wait is anywhere from 0 to 60 s "+
			"(the clients here are seconds old at the kill, so close to 60 s).",
		fmt.Sprintf("clientlib asks go-redis to reload the slot map on every failed call; until the new leader answers, its "+
			"failure policy (FailFallback) answers: %d fallback answers over the kills.", fallback),
		fmt.Sprintf("go-redis logged %d failed dials (to the killed leader) over the kills.", r.DialFailures),
		"Fresh groups for each kill: the killed node is not restarted. The machine is shared; other load moves the figures.")
	for _, k := range r.Kills {
		if !k.Limited.holds() {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Kill %d: the limited key's accounting does not hold: %d allowed, %d "+
				"refused, %d unknown, %d charged (a charge without an acknowledgment beyond the unknown outcomes is a "+
				"decision retried after its reply was lost)",
				k.Index, k.Limited.Allowed, k.Limited.Refused, k.Limited.Unknown, k.Limited.Charged))
		}
	}

	rep.CSV = [][]string{{"kill", "leader", "new_leader", "server_ns", "clientlib_ns", "goredis_fast_ns", "goredis_defaults_ns",
		"wait_ns", "goredis_defaults_wait_ns", "load_answered", "load_errors", "clientlib_fallback_answers",
		"limited_allowed", "limited_refused", "limited_unknown", "limited_charged", "limit", "accounting_holds"}}
	for _, k := range r.Kills {
		row := []string{itoaI(k.Index), k.Leader, k.NewLeader}
		for m := range numMeasures {
			row = append(row, strconv.FormatInt(int64(k.Took[m]), 10))
		}
		row = append(row, strconv.FormatInt(int64(k.Waited[measureServer]), 10), strconv.FormatInt(int64(k.Waited[measureGoRedisDefaults]), 10),
			strconv.FormatInt(k.LoadAnswered, 10), strconv.FormatInt(k.LoadErrors, 10), strconv.FormatInt(k.FallbackAnswers, 10),
			strconv.FormatInt(k.Limited.Allowed, 10), strconv.FormatInt(k.Limited.Refused, 10),
			strconv.FormatInt(k.Limited.Unknown, 10), strconv.FormatInt(k.Limited.Charged, 10), itoaI(failoverLimit),
			strconv.FormatBool(k.Limited.holds()))
		rep.CSV = append(rep.CSV, row)
	}
	p, err := barChart("Time from SIGKILL of the leader to the first decision", "ms", cats, series, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "failover.png", Caption: fmt.Sprintf("Failover after SIGKILL of the leader, "+
		"%d kills", len(r.Kills)), Plot: p, Width: widthFor(len(cats))})
	return rep, nil
}

// waitedOut reports whether the first kill waited go-redis's defaults out.
func (r *failoverResult) waitedOut() bool {
	return len(r.Kills) > 0 && r.Kills[0].Waited[measureGoRedisDefaults] > r.Wait
}

// slotZeroTag is a hash tag whose keys hash to slot 0, hence to group 0
// whatever the group count.
var slotZeroTag = func() string {
	for i := 0; ; i++ {
		tag := "fo" + strconv.Itoa(i)
		if replication.KeySlot([]byte(tag)) == 0 {
			return tag
		}
	}
}()

// groupZeroTerm is the Raft term of group 0 as the node behind c sees it
// (INFO replication's raft_term; CLUSTER INFO's epoch is the largest of
// every group's).
func groupZeroTerm(ctx context.Context, c *redis.Client) (uint64, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "raft_term:"); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO replication has no raft_term")
}
