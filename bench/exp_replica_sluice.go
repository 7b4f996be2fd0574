package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/faultproxy"
)

// The Sluice half of the lagging-replica experiment: a three-node group of
// real sluice-server processes in cluster mode, one follower's Raft link
// behind a delaying proxy. The client sends its decisions to that lagging
// follower, as a client "reading off a replica" would; a follower never
// answers a decision but redirects it (-MOVED <slot> <leader>), and the
// client follows the redirect as go-redis's ClusterClient and redis-cli -c
// do, taking the decision and its headers from the leader's one atomic
// reply.

const lagSluice = "Sluice: send to the lagging follower, follow MOVED, decide and report from the leader's one atomic reply"

// Raft timings of the experiment's group: twice the defaults, so that a
// loaded machine (a 2-core VM running the race detector) does not trigger
// elections; nothing measured depends on them.
var lagRaftArgs = []string{
	"--cluster-heartbeat-timeout", "1s",
	"--cluster-election-timeout", "1s",
	"--cluster-lease-timeout", "500ms",
}

// Bounds on the experiment's waits. Generous: they only end a run that
// would otherwise hang.
const (
	lagGroupWait    = 30 * time.Second // group formed: 3 known nodes, a leader
	lagFollowerWait = 5 * time.Second  // a write shows on the lagging follower
	lagRetryWait    = 10 * time.Second // TRYAGAIN/CLUSTERDOWN while a leader is elected
	lagMaxRedirects = 3
	lagStartTries   = 5 // a Raft port picked by binding was taken before the server bound it

	lagMarkerProbesSluice = 15
)

// sluiceGroup is the three started nodes and the proxy on the lagging
// follower's Raft link.
type sluiceGroup struct {
	env      *expEnv
	nodes    []*Server // bootstrap node, second member, lagging follower
	lagging  *Server
	proxy    *faultproxy.Proxy
	raftAddr string        // the lagging follower's, behind proxy
	leader   *redis.Client // the leader's client when the group formed
	readonly *redis.Client // connections to the lagging follower that sent READONLY
	byAddr   map[string]*redis.Client
}

// startSluiceGroup starts the three nodes: the first bootstraps a group,
// the second joins it, and the third joins with its Raft transport behind
// a fault proxy delaying what the leader sends it (it binds --cluster-raft-addr and announces the
// proxy's address, so every member dials it through the proxy). It waits
// until the leader knows all three.
func startSluiceGroup(ctx context.Context, env *expEnv) (*sluiceGroup, error) {
	g := &sluiceGroup{env: env, byAddr: map[string]*redis.Client{}}
	cluster := slices.Concat([]string{"--cluster-enabled", "yes"}, lagRaftArgs)
	first, c, err := env.startSluice(ctx, slices.Concat(cluster, []string{"--cluster-bootstrap", "yes"})...)
	if err != nil {
		return g, fmt.Errorf("bootstrap node: %w", err)
	}
	g.nodes = append(g.nodes, first)
	g.byAddr[first.Addr] = c
	join := slices.Concat(cluster, []string{"--cluster-join", first.Addr})
	second, c, err := env.startSluice(ctx, join...)
	if err != nil {
		return g, fmt.Errorf("second node: %w", err)
	}
	g.nodes = append(g.nodes, second)
	g.byAddr[second.Addr] = c

	for try := 1; ; try++ {
		raftAddr, err := pickLoopbackAddr()
		if err != nil {
			return g, err
		}
		proxy, err := faultproxy.New(raftAddr)
		if err != nil {
			return g, err
		}
		lagging, c, err := env.startSluice(ctx, slices.Concat(join, []string{"--cluster-raft-addr", raftAddr, "--cluster-announce-raft-addr", proxy.Addr()})...)
		if err == nil {
			g.proxy, g.lagging, g.raftAddr = proxy, lagging, raftAddr
			g.nodes = append(g.nodes, lagging)
			g.byAddr[lagging.Addr] = c
			break
		}
		proxy.Close()
		if try == lagStartTries || !strings.Contains(err.Error(), "address already in use") {
			return g, fmt.Errorf("lagging follower: %w", err)
		}
	}
	g.readonly = redis.NewClient(&redis.Options{
		Addr: g.lagging.Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 2,
		DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() },
	})
	env.clients = append(env.clients, g.readonly)

	leaderAddr, err := g.waitFormed(ctx)
	if err != nil {
		return g, err
	}
	g.leader = g.byAddr[leaderAddr]
	env.logf("  sluice group formed: leader %s, lagging follower %s (Raft %s through proxy %s)",
		leaderAddr, g.lagging.Addr, g.raftAddr, g.proxy.Addr())
	return g, nil
}

// close stops the proxy (the servers are stopped by the environment).
func (g *sluiceGroup) close() {
	if g.proxy != nil {
		g.proxy.Close()
	}
}

// pickLoopbackAddr returns a 127.0.0.1 address with a port that was free a
// moment ago (bound, then released, so that a server can bind it).
func pickLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// clusterInfo reads CLUSTER INFO as a map.
func clusterInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Do(ctx, "CLUSTER", "INFO").Text()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// waitFormed waits (at most lagGroupWait) until a node that is not the
// lagging follower leads with cluster_known_nodes:3 and cluster_state:ok,
// and the lagging follower knows it; it returns the leader's address.
func (g *sluiceGroup) waitFormed(ctx context.Context) (string, error) {
	deadline := time.Now().Add(lagGroupWait)
	var last string
	for {
		for _, s := range g.nodes {
			info, err := clusterInfo(ctx, g.byAddr[s.Addr])
			if err != nil {
				last = fmt.Sprintf("%s: %v", s.Addr, err)
				continue
			}
			if info["raft_state"] != "Leader" {
				continue
			}
			last = fmt.Sprintf("leader %s: known_nodes %s, state %s", s.Addr, info["cluster_known_nodes"], info["cluster_state"])
			if info["cluster_known_nodes"] != "3" || info["cluster_state"] != "ok" {
				continue
			}
			if s == g.lagging {
				return "", errors.New("the lagging follower was elected leader; rerun")
			}
			fi, err := clusterInfo(ctx, g.readonly)
			if err == nil && fi["raft_state"] == "Follower" && fi["cluster_state"] == "ok" {
				return s.Addr, nil
			}
			last = fmt.Sprintf("lagging follower: %v %v", fi, err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("group not formed within %v (%s)", lagGroupWait, last)
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return "", err
		}
	}
}

// client returns the client for a node's address; a redirect may only name
// one of the started nodes.
func (g *sluiceGroup) client(addr string) (*redis.Client, error) {
	if c, ok := g.byAddr[addr]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("redirected to %s, which is not a node of this group", addr)
}

// movedTo returns the address a -MOVED <slot> <host:port> error names.
func movedTo(err error) (string, bool) {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return "", false
	}
	f := strings.Fields(rerr.Error())
	if len(f) == 3 && f[0] == "MOVED" {
		return f[2], true
	}
	return "", false
}

// retryable is a cluster error after which nothing was applied: no leader
// yet (TRYAGAIN) or none for a while (CLUSTERDOWN).
func retryable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN")
}

// clusterDo sends one command to c and follows redirects the way a Redis
// Cluster client does: -MOVED sends it to the named node (at most
// lagMaxRedirects times), TRYAGAIN and CLUSTERDOWN (nothing applied) are
// retried for at most lagRetryWait. It returns the reply, the address that
// answered it and how many redirects it took. Any other error, such as
// Sluice's "outcome unknown" after a lost leadership, is returned as is:
// retrying it could charge twice.
func (g *sluiceGroup) clusterDo(ctx context.Context, c *redis.Client, args ...any) (any, string, int, error) {
	cmds, addr, redirects, err := g.clusterPipe(ctx, c, args)
	if err != nil {
		return nil, addr, redirects, err
	}
	v, err := cmds[0].Result()
	return v, addr, redirects, err
}

// clusterPipe is clusterDo for a pipeline, which a node runs or redirects
// whole (a pipeline with a write is one Raft entry). Errors other than a
// redirect or a retry are left in the commands.
func (g *sluiceGroup) clusterPipe(ctx context.Context, c *redis.Client, cmds ...[]any) ([]*redis.Cmd, string, int, error) {
	deadline := time.Now().Add(lagRetryWait)
	addr, redirects := c.Options().Addr, 0
	for {
		pipe := c.Pipeline()
		out := make([]*redis.Cmd, len(cmds))
		for i, args := range cmds {
			out[i] = pipe.Do(ctx, args...)
		}
		_, _ = pipe.Exec(ctx)
		err := out[0].Err()
		if to, ok := movedTo(err); ok {
			if redirects++; redirects > lagMaxRedirects {
				return nil, addr, redirects, fmt.Errorf("%v: more than %d redirects (last: %v)", cmds[0][0], lagMaxRedirects, err)
			}
			if c, err = g.client(to); err != nil {
				return nil, addr, redirects, err
			}
			addr = to
			continue
		}
		if retryable(err) && time.Now().Before(deadline) {
			if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
				return nil, addr, redirects, err
			}
			continue
		}
		for _, cmd := range out {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				if _, ok := err.(redis.Error); !ok {
					return nil, addr, redirects, err // a connection error
				}
			}
		}
		return out, addr, redirects, nil
	}
}

// onLeader runs a pipeline on the leader, following the leadership if it
// has moved.
func (g *sluiceGroup) onLeader(ctx context.Context, cmds ...[]any) ([]*redis.Cmd, error) {
	out, addr, _, err := g.clusterPipe(ctx, g.leader, cmds...)
	if err != nil {
		return nil, err
	}
	if addr != g.leader.Options().Addr {
		if addr == g.lagging.Addr {
			return nil, errors.New("the lagging follower was elected leader during the run; rerun")
		}
		g.env.logf("  sluice leadership moved to %s", addr)
		g.leader = g.byAddr[addr]
	}
	return out, nil
}

// leaderDo runs one command on the leader.
func (g *sluiceGroup) leaderDo(ctx context.Context, args ...any) (any, error) {
	out, err := g.onLeader(ctx, args)
	if err != nil {
		return nil, err
	}
	return out[0].Result()
}

// limitInfoRemaining reads "remaining" from a LIMIT.INFO reply; a key with
// no live state (nil) has the whole limit left.
func limitInfoRemaining(v any, err error) (int64, error) {
	if errors.Is(err, redis.Nil) || (err == nil && v == nil) {
		return lagLimit, nil
	}
	if err != nil {
		return 0, err
	}
	arr, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("LIMIT.INFO: not an array: %v", v)
	}
	for i := 0; i+1 < len(arr); i += 2 {
		if name, _ := arr[i].(string); name == "remaining" {
			if n, ok := arr[i+1].(int64); ok {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("LIMIT.INFO without remaining: %v", arr)
}

// measureLag writes a marker on the leader and times how long it takes to
// be readable on the lagging follower (READONLY GET), n times; it returns
// the median.
func (g *sluiceGroup) measureLag(ctx context.Context, n int) (time.Duration, error) {
	var got []time.Duration
	for i := range n {
		val := strconv.Itoa(i) + ":" + strconv.FormatInt(time.Now().UnixNano(), 10)
		start := time.Now()
		if _, err := g.leaderDo(ctx, "SET", "lag:marker", val); err != nil {
			return 0, fmt.Errorf("SET marker: %w", err)
		}
		for {
			v, err := g.readonly.Get(ctx, "lag:marker").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, fmt.Errorf("READONLY GET on the follower: %w", err)
			}
			if v == val {
				got = append(got, time.Since(start))
				break
			}
			if time.Since(start) > lagFollowerWait {
				return 0, fmt.Errorf("marker did not reach the lagging follower within %v", lagFollowerWait)
			}
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	return got[len(got)/2], nil
}

// lagSluiceNote explains the Sluice follower's measured lag.
const lagSluiceNote = "Sluice: a follower learns that an entry is committed from the leader's next append (sent every 20-40 ms " +
	"when idle: Raft's commit timeout), and hashicorp/raft keeps at most two appends in flight per follower, so the time for a " +
	"write to show on the lagging follower is longer than the proxy's lag, and its own state was behind at some requests even " +
	"with no lag added. None of it reaches a decision: the follower redirects every one to the leader."

// runSluiceLag runs the Sluice half at each lag and appends its rows.
func runSluiceLag(ctx context.Context, env *expEnv, res *lagResult) error {
	g, err := startSluiceGroup(ctx, env)
	defer g.close()
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, lagSluiceNote)
	rng := rand.New(rand.NewPCG(env.cfg.Seed, 44))
	// The follower's lag varies more than a Redis replica's (it waits for
	// Raft's next append): more samples for a steadier median.
	markers := lagMarkerProbesSluice
	if env.smoke() {
		markers = lagMarkerProbes
	}
	res.SluiceMarkers = markers
	for _, lag := range res.Lags {
		g.proxy.SetDelay(faultproxy.Requests, lag)
		measured, err := g.measureLag(ctx, markers)
		if err != nil {
			return fmt.Errorf("lag %v: %w", lag, err)
		}
		row := lagRow{Design: lagSluice, Lag: lag, Measured: measured}
		for trial := range res.Trials {
			if err := g.trial(ctx, rng, fmt.Sprintf("lag:%d:%d:sluice", lag.Milliseconds(), trial), &row); err != nil {
				return fmt.Errorf("lag %v trial %d: %w", lag, trial, err)
			}
		}
		res.Rows = append(res.Rows, row)
		env.logf("  sluice lag %s (measured %s): %d wrong of %d; %d answered by the follower, %d redirected; the follower's own state was stale at %d",
			fmtMs(lag), fmtMs(measured), row.Wrong, row.Probes, row.FollowerAnswered, row.Redirected, row.Stale)
	}
	return nil
}

// fwCheck is the experiment's decision on Sluice: a fixed window of
// lagLimit per lagWindowMs (FW.CHECK ... MS), with cost.
func fwCheck(key string, cost int) []any {
	return []any{"FW.CHECK", key, lagLimit, lagWindowMs / 1000, cost, "MS"}
}

// trial is lagTrial's protocol on the group. The client has used its whole
// window, and the lagging follower has applied that; the window is then
// forced over on the leader (LIMIT.RESET and the request that starts the
// new window, in one pipeline, as experiment 2's rollover does on Redis);
// and the client
// sends lagProbes decisions at random moments in the next lagProbeSpread,
// each to the lagging follower on a READONLY connection. Each probe also
// reads the follower's own state first (READONLY LIMIT.INFO), to show what
// deciding from it would have said; a rejection is checked against the
// leader's state right after it (LIMIT.INFO on the node that decided).
func (g *sluiceGroup) trial(ctx context.Context, rng *rand.Rand, key string, row *lagRow) error {
	// Use the whole window. Fixed windows are aligned to the epoch: when
	// this one ends within a few seconds, take the next one, so that time
	// does not roll it over on every node in the middle of the trial.
	for attempt := 0; ; attempt++ {
		d, err := parseDecision(g.leaderDo(ctx, fwCheck(key, lagLimit)...))
		if err != nil {
			return fmt.Errorf("use the window: %w", err)
		}
		if d.Limited || d.Remaining != 0 {
			return fmt.Errorf("using the whole window: %+v", d)
		}
		if d.ResetIn >= 3000 || attempt > 0 {
			break
		}
		if err := sleepUntil(ctx, time.Now().Add(time.Duration(d.ResetIn+50)*time.Millisecond)); err != nil {
			return err
		}
	}
	// The exhausted window is on the lagging follower before the rollover.
	deadline := time.Now().Add(lagFollowerWait)
	for {
		left, err := limitInfoRemaining(g.readonly.Do(ctx, "LIMIT.INFO", key).Result())
		if err != nil {
			return fmt.Errorf("READONLY LIMIT.INFO on the follower: %w", err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the used window did not reach the lagging follower within %v", lagFollowerWait)
		}
		if err := sleepUntil(ctx, time.Now().Add(2*time.Millisecond)); err != nil {
			return err
		}
	}
	// The rollover, on the leader, in one pipeline (one Raft entry).
	roll, err := g.onLeader(ctx, []any{"LIMIT.RESET", key}, fwCheck(key, 1))
	if err != nil {
		return fmt.Errorf("rollover: %w", err)
	}
	if err := roll[0].Err(); err != nil {
		return fmt.Errorf("LIMIT.RESET: %w", err)
	}
	if d, err := parseDecision(roll[1].Result()); err != nil || d.Limited {
		return fmt.Errorf("the rollover's request: %+v, %v", d, err)
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
		row.Probes++
		// What the follower's own applied state says at this moment.
		left, err := limitInfoRemaining(g.readonly.Do(ctx, "LIMIT.INFO", key).Result())
		if err != nil {
			return fmt.Errorf("READONLY LIMIT.INFO on the follower: %w", err)
		}
		if left < 1 {
			row.Stale++
		}
		// The decision, sent to the lagging follower.
		v, at, redirects, err := g.clusterDo(ctx, g.readonly, fwCheck(key, 1)...)
		d, err := parseDecision(v, err)
		if err != nil {
			return fmt.Errorf("decision: %w", err)
		}
		if redirects == 0 {
			row.FollowerAnswered++
			if role, err := g.readonly.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				return errors.New("the lagging follower was elected leader during the run; rerun")
			}
		} else {
			row.Redirected++
		}
		if !d.Limited {
			continue
		}
		row.Rejected++
		c, err := g.client(at)
		if err != nil {
			return err
		}
		fresh, err := limitInfoRemaining(c.Do(ctx, "LIMIT.INFO", key).Result())
		if err != nil {
			return fmt.Errorf("LIMIT.INFO on %s: %w", at, err)
		}
		if fresh >= lagFreshAtLeast {
			row.Wrong++
		}
	}
	return nil
}
