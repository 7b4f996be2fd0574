package replication

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
)

// Groups is a node's share of a cluster whose slots are split over several
// Raft groups: group g owns a contiguous slot range, has its own engine,
// log, snapshots, batcher and leader, and its leader alone decides its
// keys. Every node is a member of every group (voting in up to
// Replicas of them, following the others as a non-voter), so any node
// knows every group's leader and can send a client to it. The groups share
// one Raft port (see groupLayer). With one group, Groups is that group's
// Node and nothing more, with today's directory layout.
//
// A pipeline whose commands all belong to one group goes to that group's
// node whole; one that spans groups is cut into a pipeline per group, run
// concurrently, and its replies put back in order (keyspace-wide commands
// in it are barriers). A command whose keys
// belong to different groups is refused with engine.ErrCrossSlot and
// changes nothing, as Redis Cluster refuses keys in different slots.
type Groups struct {
	nodes    []*Node
	engines  []*engine.Engine
	shared   *authLayer // nil with one group
	replicas int
	// maxMemory is the node's whole limit; each group's is its share.
	maxMemory atomic.Int64

	// avoid holds the members a leadership transfer to failed, until
	// when the balancer leaves them alone (balancer goroutine only).
	avoid     map[string]time.Time
	probe     func(clientAddr string) bool
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// GroupsConfig is what Groups adds to a node's Config.
type GroupsConfig struct {
	// Replicas is the number of voters each group keeps (the replication
	// factor); further members follow as non-voters. Default 3.
	Replicas int
	// BalanceInterval is how often the node checks that leaders and
	// voting seats are spread evenly. Default 2s; negative disables.
	BalanceInterval time.Duration

	// probe reports whether a member's client port answers (the
	// balancer's liveness check); tests replace it. Default: a TCP dial.
	probe func(clientAddr string) bool
}

// DefaultReplicasPerGroup is GroupsConfig.Replicas's default.
const DefaultReplicasPerGroup = 3

const (
	defaultBalanceInterval = 2 * time.Second
	groupsFile             = "groups"
)

// GroupSlots is the slot range of group g of n: the slots split as evenly
// as whole slots allow, in order.
func GroupSlots(g, n int) engine.SlotRange {
	return engine.SlotRange{First: g * Slots / n, Last: (g+1)*Slots/n - 1}
}

// StoredGroups is the group count recorded in dir by an earlier start (0
// when there is none): a restarting node keeps its count, and a joining
// node learns the cluster's from a member.
func StoredGroups(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "raft.db")); err == nil {
			return 1, nil // a lone group's state
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("replication: %s: bad group count %q", filepath.Join(dir, groupsFile), b)
	}
	return n, nil
}

// OpenGroups starts this node's member of each group, one engine per
// group (engines[g] serves group g's slots; see Open for what each must
// be). cfg is every group's; its Dir holds one directory per group.
func OpenGroups(cfg Config, gc GroupsConfig, engines []*engine.Engine) (*Groups, error) {
	n := len(engines)
	if n < 1 || n > maxGroups {
		return nil, fmt.Errorf("replication: %d groups: want 1 to %d", n, maxGroups)
	}
	if gc.Replicas <= 0 {
		gc.Replicas = DefaultReplicasPerGroup
	}
	if gc.BalanceInterval == 0 {
		gc.BalanceInterval = defaultBalanceInterval
	}
	if gc.probe == nil {
		gc.probe = dialProbe
	}
	gs := &Groups{engines: engines, replicas: gc.Replicas, stop: make(chan struct{}), avoid: map[string]time.Time{}, probe: gc.probe}
	// Every engine is made with the node's limit; each group gets a share.
	gs.maxMemory.Store(engines[0].MaxMemory())
	if stored, err := StoredGroups(cfg.Dir); err != nil {
		return nil, err
	} else if stored != 0 && stored != n {
		return nil, fmt.Errorf("replication: %s holds %d groups, not %d: the group count is fixed when the cluster is bootstrapped", cfg.Dir, stored, n)
	}
	if n == 1 {
		node, err := Open(cfg, engines[0])
		if err != nil {
			return nil, err
		}
		gs.nodes = []*Node{node}
		return gs, nil
	}

	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	auth, err := loadPeerAuth(&cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.ID, err = nodeID(cfg.Dir, cfg.ID); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, groupsFile), []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return nil, err
	}
	var adv net.Addr
	if cfg.AdvertiseRaftAddr != "" {
		if adv, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseRaftAddr); err != nil {
			return nil, fmt.Errorf("replication: advertise address: %w", err)
		}
	}
	shared, layers, err := listenGroups(cfg.RaftAddr, adv, auth, &cfg, n)
	if err != nil {
		return nil, fmt.Errorf("replication: raft transport: %w", err)
	}
	gs.shared = shared
	if auth != nil {
		cfg.Logger.Info("replication: raft transport authenticated", "mode", auth.mode(), "raft_addr", shared.Addr().String(), "groups", n)
	}
	for g := range n {
		c := cfg
		c.Dir = filepath.Join(cfg.Dir, "g"+strconv.Itoa(g))
		c.slots = GroupSlots(g, n)
		c.stream = layers[g]
		c.Logger = cfg.Logger.With("group", g)
		if g != 0 {
			c.State = nil // group 0 replicates the users
		}
		node, err := Open(c, engines[g])
		if err != nil {
			for _, o := range gs.nodes {
				_ = o.close(false)
			}
			shared.Close()
			return nil, fmt.Errorf("replication: group %d: %w", g, err)
		}
		gs.nodes = append(gs.nodes, node)
	}
	gs.SetMaxMemory(gs.maxMemory.Load())
	if gc.BalanceInterval > 0 {
		gs.wg.Add(1)
		go gs.balancer(gc.BalanceInterval)
	}
	return gs, nil
}

// Close stops every group (each hands its leadership over, as Node.Close
// does), then the shared listener.
func (gs *Groups) Close() error {
	gs.closeOnce.Do(func() {
		close(gs.stop)
		gs.wg.Wait()
		var wg sync.WaitGroup
		errs := make([]error, len(gs.nodes))
		for i, n := range gs.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = n.Close() }()
		}
		wg.Wait()
		if gs.shared != nil {
			errs = append(errs, gs.shared.Close())
		}
		gs.closeErr = errors.Join(errs...)
	})
	return gs.closeErr
}

// Len is the number of groups.
func (gs *Groups) Len() int { return len(gs.nodes) }

// Group is group g's node.
func (gs *Groups) Group(g int) *Node { return gs.nodes[g] }

// groupOfSlot is the group owning slot: the last group whose range starts
// at or before it (GroupSlots' First is floor(g * Slots / n)).
func (gs *Groups) groupOfSlot(slot int) int { return ((slot+1)*len(gs.nodes) - 1) / Slots }

// GroupOf is the group owning key.
func (gs *Groups) GroupOf(key []byte) int { return gs.groupOfSlot(KeySlot(key)) }

// Command routing: the group of every command of a pipeline.
const (
	routeCrossSlot  = -1 // keys in different groups
	routeKeyspace   = -2 // KEYS, SCAN, FLUSHALL
	routeTxKeyspace = -3 // a transaction that queued KEYS, SCAN or FLUSHALL
)

// route is the group c's keys belong to, or a route constant. A command
// without keys (EVAL with none) goes to group 0, whose slot 0 a redirect
// names.
func (gs *Groups) route(c *engine.Command) int {
	if c.KeyspaceWide() {
		return routeKeyspace
	}
	if c.Op == engine.OpExec {
		for i := range c.Sub {
			if c.Sub[i].KeyspaceWide() {
				// Its group would run it on its own keys alone: a
				// FLUSHALL that empties one group of several.
				return routeTxKeyspace
			}
		}
	}
	const none = -10
	g := none
	c.EachKey(func(key []byte) {
		switch k := gs.GroupOf(key); {
		case g == none:
			g = k
		case g != k:
			g = routeCrossSlot
		}
	})
	if g == none {
		return 0
	}
	return g
}

// Execute runs a pipeline with Node.Execute's contract, each command on
// the group its keys belong to.
func (gs *Groups) Execute(b *engine.Batch, now int64) {
	if len(gs.nodes) == 1 {
		gs.nodes[0].Execute(b, now)
		return
	}
	const empty, split = -100, -101
	one := empty
	for i := range b.Cmds {
		g := gs.route(&b.Cmds[i])
		if g < 0 || (one != empty && g != one) {
			one = split
			break
		}
		one = g
	}
	switch one {
	case empty:
		b.Replies = b.Replies[:0]
	case split:
		gs.executeSplit(b, now)
	default:
		gs.nodes[one].Execute(b, now)
	}
}

// executeSplit runs a pipeline that spans groups: cut into a part per
// group, the parts run concurrently and their replies go back in order. A
// keyspace-wide command (FLUSHALL, KEYS, SCAN) is a barrier: the keyed
// commands before it run first, then it, then the ones after, as Redis
// runs a pipeline in order. The parts are made per call, not pooled: a
// reply's bytes live in its part's buffers, which must stay untouched
// until the caller has written the replies out (the parts are garbage
// once it reuses b).
func (gs *Groups) executeSplit(b *engine.Batch, now int64) {
	if cap(b.Replies) < len(b.Cmds) {
		b.Replies = make([]engine.Reply, len(b.Cmds))
	}
	b.Replies = b.Replies[:len(b.Cmds)]
	routes := make([]int, len(b.Cmds))
	start := 0
	for i := range b.Cmds {
		if routes[i] = gs.route(&b.Cmds[i]); routes[i] == routeKeyspace {
			gs.runKeyed(b, routes, start, i, now)
			b.Replies[i] = gs.keyspace(&b.Cmds[i], now, b.ReadOnly)
			start = i + 1
		}
	}
	gs.runKeyed(b, routes, start, len(b.Cmds), now)
}

// runKeyed runs b.Cmds[from:to], none keyspace-wide, each on the group
// routes names.
func (gs *Groups) runKeyed(b *engine.Batch, routes []int, from, to int, now int64) {
	if from >= to {
		return
	}
	parts := make([]*engine.Batch, len(gs.nodes))
	index := make([][]int, len(gs.nodes))
	for i := from; i < to; i++ {
		switch g := routes[i]; g {
		case routeCrossSlot:
			b.Replies[i] = engine.Reply{Kind: engine.ReplyError, Err: engine.ErrCrossSlot}
		case routeTxKeyspace:
			b.Replies[i] = engine.Reply{Kind: engine.ReplyError, Err: engine.ErrTxKeyspace}
		default:
			if parts[g] == nil {
				parts[g] = &engine.Batch{ReadOnly: b.ReadOnly}
			}
			parts[g].Cmds = append(parts[g].Cmds, b.Cmds[i])
			index[g] = append(index[g], i)
		}
	}
	var wg sync.WaitGroup
	for g, part := range parts {
		if part != nil {
			wg.Go(func() { gs.nodes[g].Execute(part, now) })
		}
	}
	wg.Wait()
	for g, part := range parts {
		for j, i := range index[g] {
			b.Replies[i] = part.Replies[j]
		}
	}
}

// answers reports whether this node answers group g's keyspace-wide
// commands: as its leader, or, for a read on a READONLY connection, from
// its copy.
func (gs *Groups) answers(g int, write, readOnly bool) bool {
	return gs.nodes[g].IsLeader() || (!write && readOnly)
}

// keyspace runs KEYS, SCAN or FLUSHALL over the groups this node leads
// (a READONLY connection's reads over every group), as a Redis Cluster
// node answers them for its own slots: cluster clients send them to every
// master. SCAN's cursor carries the group in its bits 48-55.
func (gs *Groups) keyspace(c *engine.Command, now int64, readOnly bool) engine.Reply {
	one := func(g int, c engine.Command) engine.Reply {
		var b engine.Batch
		b.ReadOnly = readOnly
		b.Cmds = append(b.Cmds, c)
		gs.nodes[g].Execute(&b, now)
		return b.Replies[0]
	}
	write := c.Writes()
	led := make([]int, 0, len(gs.nodes))
	for g := range gs.nodes {
		if gs.answers(g, write, readOnly) {
			led = append(led, g)
		}
	}
	if len(led) == 0 {
		// Led nowhere here: the redirect (or TRYAGAIN) group 0 gives.
		return one(0, *c)
	}
	if c.Op == engine.OpScan {
		return gs.scan(c, led, one)
	}
	var items []engine.Reply
	for _, g := range led {
		r := one(g, *c)
		switch {
		case r.Kind == engine.ReplyError:
			return r
		case r.Kind == engine.ReplyArray:
			items = append(items, r.Items...)
		}
	}
	if write {
		return engine.Reply{Kind: engine.ReplyOK}
	}
	return engine.Reply{Kind: engine.ReplyArray, Items: items}
}

const scanGroupShift = 48

func (gs *Groups) scan(c *engine.Command, led []int, one func(int, engine.Command) engine.Reply) engine.Reply {
	cursor := uint64(c.N[0])
	g := int(cursor >> scanGroupShift)
	inner := cursor & (1<<scanGroupShift - 1)
	for _, lg := range led {
		if lg < g {
			continue
		}
		if lg > g {
			g, inner = lg, 0
		}
		cc := *c
		cc.N[0] = int64(inner)
		r := one(g, cc)
		if r.Kind != engine.ReplyArray || len(r.Items) != 2 {
			return r
		}
		next, err := strconv.ParseUint(replyText(r.Items[0]), 10, 64)
		if err != nil || next >= 1<<scanGroupShift {
			return engine.Reply{Kind: engine.ReplyError, Err: fmt.Errorf("replication: scan cursor %q out of range", replyText(r.Items[0]))}
		}
		if next == 0 {
			// This group is done: go on with the next one, in a later
			// call unless this one found nothing.
			i := slices.Index(led, g)
			if i+1 == len(led) {
				return r
			}
			if len(r.Items[1].Items) == 0 {
				g, inner = led[i+1], 0
				continue
			}
			next = uint64(led[i+1]) << scanGroupShift
		} else {
			next |= uint64(g) << scanGroupShift
		}
		r.Items[0] = engine.Reply{Kind: engine.ReplyBulk, Str: strconv.FormatUint(next, 10)}
		return r
	}
	return engine.Reply{Kind: engine.ReplyArray, Items: []engine.Reply{{Kind: engine.ReplyBulk, Str: "0"}, {Kind: engine.ReplyArray}}}
}

func replyText(r engine.Reply) string {
	if r.Str != "" {
		return r.Str
	}
	return string(r.Bulk)
}

// Stats sums the groups' engines' counters. The keys and memory are those
// of the groups this node leads (of every group when it leads none), as a
// Redis Cluster master's DBSIZE counts its own slots: a cluster client that
// sums DBSIZE over the masters counts each key once.
func (gs *Groups) Stats() engine.Stats {
	var s engine.Stats
	led := gs.IsLeader()
	for g, e := range gs.engines {
		t := e.Stats()
		s.Allowed += t.Allowed
		s.Limited += t.Limited
		s.Swept += t.Swept
		s.ReceiptHits += t.ReceiptHits
		s.LeasesAcquired += t.LeasesAcquired
		s.LeasesRefused += t.LeasesRefused
		if !led || gs.nodes[g].IsLeader() {
			s.Keys += t.Keys
			s.Memory += t.Memory
		}
	}
	return s
}

// ResetStats zeroes every group's engine counters.
func (gs *Groups) ResetStats() {
	for _, e := range gs.engines {
		e.ResetStats()
	}
}

// Shards is the shard count of each group's engine.
func (gs *Groups) Shards() int { return gs.engines[0].Shards() }

// MaxMemory is this node's memory limit, 0 for none.
func (gs *Groups) MaxMemory() int64 { return gs.maxMemory.Load() }

// SetMaxMemory sets this node's limit; each group gets an equal share
// (keys spread evenly over slots, so over groups).
func (gs *Groups) SetMaxMemory(v int64) {
	gs.maxMemory.Store(v)
	share := v
	if v > 0 && len(gs.nodes) > 1 {
		share = max(1, v/int64(len(gs.nodes)))
	}
	for _, n := range gs.nodes {
		n.SetMaxMemory(share)
	}
}

// ClusterView is group 0's view (ROLE, INFO replication, CLUSTER MYID).
func (gs *Groups) ClusterView() engine.ClusterView { return gs.nodes[0].ClusterView() }

// ClusterViews are every group's views, in slot order, for CLUSTER SLOTS,
// SHARDS, NODES and INFO.
func (gs *Groups) ClusterViews() []engine.ClusterView {
	vs := make([]engine.ClusterView, len(gs.nodes))
	for g, n := range gs.nodes {
		vs[g] = n.ClusterView()
	}
	return vs
}

// Join adds the node to every group: as a voter where the group has fewer
// than Replicas, as a non-voter elsewhere (the balancer may later give it
// a seat). It joins the groups this node leads and returns the redirect
// of the first other group the node is not yet in, so a joiner that
// follows redirects visits each group's leader; idempotent.
func (gs *Groups) Join(id, raftAddr, clientAddr string) error {
	if len(gs.nodes) == 1 {
		return gs.nodes[0].Join(id, raftAddr, clientAddr)
	}
	var redirect error
	for _, n := range gs.nodes {
		if !n.IsLeader() {
			if redirect == nil && !n.hasMember(id, raftAddr, clientAddr) {
				redirect = n.leaderOrRedirect()
				if redirect == nil {
					redirect = engine.ErrTryAgain
				}
			}
			continue
		}
		if err := n.join(id, raftAddr, clientAddr, n.voters() < gs.replicas); err != nil {
			return err
		}
	}
	return redirect
}

// Forget removes the node from every group this node leads, and returns
// the redirect of the first other group that still has it; idempotent.
func (gs *Groups) Forget(id string) error {
	if len(gs.nodes) == 1 {
		return gs.nodes[0].Forget(id)
	}
	var redirect error
	for _, n := range gs.nodes {
		if !n.IsLeader() {
			if redirect == nil && n.hasServer(id) {
				redirect = n.leaderOrRedirect()
				if redirect == nil {
					redirect = engine.ErrTryAgain
				}
			}
			continue
		}
		if err := n.Forget(id); err != nil {
			return err
		}
	}
	return redirect
}

// Replicate commits a change to the users through group 0.
func (gs *Groups) Replicate(change []byte) error { return gs.nodes[0].Replicate(change) }

// The readiness facts, over every group: this node leads one if it leads
// any; a leader is known when every group has one; the indexes are sums,
// so that their difference is the whole apply lag.

// IsLeader reports whether this node leads any group.
func (gs *Groups) IsLeader() bool {
	for _, n := range gs.nodes {
		if n.IsLeader() {
			return true
		}
	}
	return false
}

// HasLeader reports whether every group has a known leader.
func (gs *Groups) HasLeader() bool {
	for _, n := range gs.nodes {
		if !n.HasLeader() {
			return false
		}
	}
	return true
}

// CommitIndex is the sum of the groups' commit indexes.
func (gs *Groups) CommitIndex() (sum uint64) {
	for _, n := range gs.nodes {
		sum += n.CommitIndex()
	}
	return sum
}

// AppliedIndex is the sum of the groups' applied indexes.
func (gs *Groups) AppliedIndex() (sum uint64) {
	for _, n := range gs.nodes {
		sum += n.AppliedIndex()
	}
	return sum
}

// LastLeaderContact is the longest any group this node follows has gone
// without hearing from its leader.
func (gs *Groups) LastLeaderContact() (d time.Duration) {
	for _, n := range gs.nodes {
		d = max(d, n.LastLeaderContact())
	}
	return d
}

// LeaderChanges sums the leaders every group has seen take office.
func (gs *Groups) LeaderChanges() (sum uint64) {
	for _, n := range gs.nodes {
		sum += n.LeaderChanges()
	}
	return sum
}

// ReplicationStats sums the groups' batcher counters.
func (gs *Groups) ReplicationStats() ReplicationStats {
	var s ReplicationStats
	for _, n := range gs.nodes {
		t := n.ReplicationStats()
		s.Entries += t.Entries
		s.Commands += t.Commands
		s.OutcomeUnknown += t.OutcomeUnknown
		s.Redirects += t.Redirects
	}
	return s
}

// ID is this node's id (the same in every group).
func (gs *Groups) ID() string { return gs.nodes[0].ID() }

// RaftAddr is this node's Raft address (shared by its groups).
func (gs *Groups) RaftAddr() string { return gs.nodes[0].RaftAddr() }

// ClientAddr is the client address this node announces.
func (gs *Groups) ClientAddr() string { return gs.nodes[0].ClientAddr() }

// HotKeys merges the groups' engines' rankings.
func (gs *Groups) HotKeys(by engine.HotKeyBy, n int, now int64) []engine.HotKey {
	if len(gs.engines) == 1 {
		return gs.engines[0].HotKeys(by, n, now)
	}
	var all []engine.HotKey
	for _, e := range gs.engines {
		all = append(all, e.HotKeys(by, n, now)...)
	}
	slices.SortStableFunc(all, func(a, b engine.HotKey) int {
		switch {
		case a.Count > b.Count:
			return -1
		case a.Count < b.Count:
			return 1
		}
		return strings.Compare(string(a.Key), string(b.Key))
	})
	return all[:min(n, len(all))]
}

// HotKeysTracking reports whether the engines track hot keys.
func (gs *Groups) HotKeysTracking() bool { return gs.engines[0].HotKeysTracking() }

// SetHotKeysTracking turns tracking on or off in every group's engine.
func (gs *Groups) SetHotKeysTracking(on bool) {
	for _, e := range gs.engines {
		e.SetHotKeysTracking(on)
	}
}

// hasMember reports whether id is in this group's configuration with
// raftAddr and known clientAddr, as Join would leave it.
func (n *Node) hasMember(id, raftAddr, clientAddr string) bool {
	m, ok := n.members.get(id)
	return ok && m.RaftAddr == raftAddr && m.ClientAddr == clientAddr && n.hasServer(id)
}

// hasServer reports whether id is in this group's Raft configuration.
func (n *Node) hasServer(id string) bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// voters counts this group's voters.
func (n *Node) voters() (count int) {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return 0
	}
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			count++
		}
	}
	return count
}

// balancer spreads leadership and voting seats over the nodes: each node,
// for the groups it leads, hands a group to a voter leading at least two
// fewer groups than it does (after a node returns, say), and moves a
// voting seat from the member holding the most to a non-voter holding at
// least two fewer (a node that joined with every group full). One change
// per round, so the nodes' decisions, each made from its own view, cannot
// pile up on one target.
func (gs *Groups) balancer(every time.Duration) {
	defer gs.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-gs.stop:
			return
		case <-tick.C:
			if !gs.balanceSeats() {
				gs.balanceLeaders()
			}
		}
	}
}

// groupConfig is one group's membership as this node sees it.
type groupConfig struct {
	leader  string
	servers []raft.Server
}

func (gs *Groups) configs() []groupConfig {
	cs := make([]groupConfig, len(gs.nodes))
	for g, n := range gs.nodes {
		_, id := n.raft.LeaderWithID()
		cs[g].leader = string(id)
		if cf := n.raft.GetConfiguration(); cf.Error() == nil {
			cs[g].servers = cf.Configuration().Servers
		}
	}
	return cs
}

// balanceLeaders transfers one group this node leads to a voter leading
// two or more fewer groups; it reports whether it did.
func (gs *Groups) balanceLeaders() bool {
	cs := gs.configs()
	leads := map[string]int{}
	for _, c := range cs {
		for _, s := range c.servers {
			if s.Suffrage == raft.Voter {
				leads[string(s.ID)] += 0
			}
		}
		if c.leader != "" {
			leads[c.leader]++
		}
	}
	self := gs.ID()
	for g, n := range gs.nodes {
		if cs[g].leader != self || !n.IsLeader() {
			continue
		}
		var to raft.Server
		best := leads[self] - 1
		for _, s := range cs[g].servers {
			if s.Suffrage == raft.Voter && string(s.ID) != self && leads[string(s.ID)] < best && gs.usable(n, string(s.ID)) {
				to, best = s, leads[string(s.ID)]
			}
		}
		if to.ID == "" {
			continue
		}
		n.log.Info("replication: handing leadership over to balance the groups", "to", to.ID, "leads_here", leads[self], "leads_there", leads[string(to.ID)])
		if !n.transferTo(to.ID, to.Address) {
			gs.avoid[string(to.ID)] = time.Now().Add(balanceBackoff)
		}
		return true
	}
	return false
}

// balanceSeats fills an under-replicated group this node leads from its
// non-voters, or moves a seat from the member with the most to a
// non-voter with two or more fewer; it reports whether it changed one.
func (gs *Groups) balanceSeats() bool {
	cs := gs.configs()
	seats := map[string]int{}
	for _, c := range cs {
		for _, s := range c.servers {
			if s.Suffrage == raft.Voter {
				seats[string(s.ID)]++
			} else {
				seats[string(s.ID)] += 0
			}
		}
	}
	self := gs.ID()
	for g, n := range gs.nodes {
		if cs[g].leader != self || !n.IsLeader() {
			continue
		}
		var voters, others []raft.Server
		for _, s := range cs[g].servers {
			if s.Suffrage == raft.Voter {
				voters = append(voters, s)
			} else {
				others = append(others, s)
			}
		}
		others = slices.DeleteFunc(others, func(s raft.Server) bool { return !gs.usable(n, string(s.ID)) })
		if len(others) == 0 {
			continue
		}
		fewest := slices.MinFunc(others, func(a, b raft.Server) int { return seats[string(a.ID)] - seats[string(b.ID)] })
		if len(voters) < gs.replicas {
			n.log.Info("replication: giving a non-voter a seat", "id", fewest.ID)
			n.promote(fewest)
			return true
		}
		var most raft.Server
		for _, s := range voters {
			if string(s.ID) != self && (most.ID == "" || seats[string(s.ID)] > seats[string(most.ID)]) {
				most = s
			}
		}
		if most.ID == "" || seats[string(most.ID)]-seats[string(fewest.ID)] < 2 {
			continue
		}
		n.log.Info("replication: moving a seat to balance the groups", "from", most.ID, "to", fewest.ID)
		if n.promote(fewest) {
			if _, err := n.await(func() raft.Future { return n.raft.DemoteVoter(most.ID, 0, membershipTimeout) }); err != nil {
				n.log.Warn("replication: could not demote a voter", "id", most.ID, "err", err)
			}
		}
		return true
	}
	return false
}

// balanceBackoff is how long the balancer leaves a member alone after a
// leadership transfer to it failed.
const balanceBackoff = 30 * time.Second

// usable reports whether the balancer may give member id a seat or a
// group: no transfer to it failed lately, and its client port answers (a
// member that is down would cost the group a seat it cannot fill, or a
// transfer that stalls writes for an election timeout). An answering port
// does not prove the member has caught up; the group keeps its quorum from
// the others meanwhile.
func (gs *Groups) usable(n *Node, id string) bool {
	if until, ok := gs.avoid[id]; ok {
		if time.Now().Before(until) {
			return false
		}
		delete(gs.avoid, id)
	}
	m, ok := n.members.get(id)
	if !ok || m.ClientAddr == "" {
		return false
	}
	if !gs.probe(m.ClientAddr) {
		gs.avoid[id] = time.Now().Add(balanceBackoff)
		return false
	}
	return true
}

func dialProbe(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (n *Node) promote(s raft.Server) bool {
	if _, err := n.await(func() raft.Future { return n.raft.AddVoter(s.ID, s.Address, 0, membershipTimeout) }); err != nil {
		n.log.Warn("replication: could not give a non-voter a seat", "id", s.ID, "err", err)
		return false
	}
	return true
}
