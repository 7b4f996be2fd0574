// Package replication runs Sluice in cluster mode: a Raft group
// (hashicorp/raft over raft-boltdb/v2) whose leader makes every decision
// with its own clock and answers only after the decision is committed, and
// whose followers redirect decisions to the leader. A Node wraps one
// engine.Engine and offers the same Execute contract plus engine.Clustered;
// its methods are safe for concurrent use, a Batch is not. Open starts the
// node's goroutines and Close waits for them.
//
// The Raft port carries the log, so it is authenticated: mutual TLS
// against a cluster CA (Config.PeerTLS; certs.Generate writes a CA and
// node certificates), or a shared secret proved by challenge-response
// (Config.Secret; authenticates but does not encrypt). Without either,
// Open accepts only loopback Raft addresses (ErrProtectedMode). See
// DESIGN.md.
package replication

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/sluicehq/sluice/engine"
)

// Node is one member of a replication group.
type Node struct {
	cfg      Config
	id       string
	raftAddr string // advertised
	eng      *engine.Engine
	log      *slog.Logger

	raft  *raft.Raft
	trans *raft.NetworkTransport
	auth  *peerAuth  // nil: plain TCP, loopback only
	layer *authLayer // the transport's stream layer when auth is set
	store *raftboltdb.BoltStore
	fsm   *fsm

	// origin tells this process's batch entries from everyone else's.
	origin  uint64
	members members
	// maxMemory is the configured limit; the engine's own limit is driven
	// by the FSM (see fsm.setGate).
	maxMemory atomic.Int64

	// The batcher: queue holds waiting pipelines, slots bounds the entries
	// in flight, inflight hands proposed entries to the completer.
	queue     chan *request
	slots     chan struct{}
	inflight  chan inflightEntry
	seq       uint64 // batcher goroutine only
	pendingMu sync.Mutex
	pending   map[uint64]*proposal

	// submitMu orders submissions against Close: once submitClosed is set
	// under the write lock, nothing more enters queue, so Close can drain
	// it, and no Raft operation starts (await); ops counts those under way.
	submitMu     sync.RWMutex
	submitClosed bool
	ops          sync.WaitGroup

	// Leader tracking.
	obsCh         chan raft.Observation
	observer      *raft.Observer
	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced on every change
	noLeaderSince atomic.Int64  // unix ns; 0 while a leader is known
	leaderChanges atomic.Uint64 // leaders observed (LeaderChanges)
	// lastLeader is the id of the last leader observed (set by watch, in
	// the order Raft reports leaders), kept while none is known: CLUSTER
	// SLOTS goes on naming it during an election, as Redis Cluster names a
	// failed master until a replica replaces it (a client that reloads its
	// slot map then would otherwise find no slots at all).
	lastLeader atomic.Pointer[string]
	opened     time.Time // LastLeaderContact's base before any contact
	// transferring is set while this leader hands leadership over.
	transferring atomic.Bool

	stats struct {
		entries, commands, unknown, redirects atomic.Uint64
	}

	stop      chan struct{}
	batchWG   sync.WaitGroup // batcher and completer
	wg        sync.WaitGroup // the others
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// request is one connection's pipeline waiting for its entry to commit.
type request struct {
	b    *engine.Batch
	now  int64 // when the server received it
	err  error
	done chan struct{} // buffered: the signaller never blocks
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// proposal is the set of pipelines one Raft entry carries. Exactly one of
// the FSM (applied: replies are in the batches) and the completer (failed)
// wins state and answers the requests.
type proposal struct {
	seq   uint64
	reqs  []*request
	state atomic.Int32 // proposalPending, proposalApplied, proposalFailed
}

const (
	proposalPending int32 = iota
	proposalApplied
	proposalFailed
)

type inflightEntry struct {
	p *proposal
	f raft.ApplyFuture
}

// errNotProposed: the batcher found this node no longer leads before it
// proposed the pipeline; the pipeline is routed again (a redirect is safe,
// since nothing was proposed).
var errNotProposed = errors.New("replication: not proposed: not the leader")

// errSelfLeader: while waiting for a leader, this node became it.
var errSelfLeader = errors.New("replication: this node is the leader")

const logCacheSize = 512

// Open starts a node over eng, which must not have a journal attached (the
// Raft log is the journal) and must not be used directly while the node is
// open. The engine's maxmemory becomes the node's (see SetMaxMemory).
func Open(cfg Config, eng *engine.Engine) (*Node, error) {
	if eng == nil {
		return nil, errors.New("replication: Open needs an engine")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	// Credentials (and the protected-mode rule) before anything touches
	// the disk or the network.
	auth, err := loadPeerAuth(&cfg)
	if err != nil {
		return nil, err
	}
	cfg.Secret = nil // the node keeps its own copy, in auth
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	id, err := nodeID(cfg.Dir, cfg.ID)
	if err != nil {
		return nil, err
	}
	cfg.ID = id
	var o [8]byte
	if _, err := rand.Read(o[:]); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:           cfg,
		id:            id,
		auth:          auth,
		eng:           eng,
		log:           cfg.Logger.With("node", id[:min(8, len(id))]),
		origin:        binary.LittleEndian.Uint64(o[:]),
		queue:         make(chan *request, 4096),
		slots:         make(chan struct{}, cfg.MaxInflight),
		inflight:      make(chan inflightEntry, cfg.MaxInflight),
		pending:       make(map[uint64]*proposal),
		obsCh:         make(chan raft.Observation, 64),
		leaderChanged: make(chan struct{}),
		stop:          make(chan struct{}),
		opened:        time.Now(),
	}
	n.members.m = map[string]member{}
	n.fsm = &fsm{n: n, eng: eng, log: n.log, gate: -1}
	// From here on the FSM drives the engine's limit (see fsm.setGate).
	n.maxMemory.Store(eng.MaxMemory())
	eng.SetMaxMemory(0)
	if err := n.openRaft(); err != nil {
		n.closeStores()
		eng.SetMaxMemory(n.maxMemory.Load())
		return nil, err
	}
	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.observer)
	if _, id := n.raft.LeaderWithID(); id == "" {
		n.noLeaderSince.Store(time.Now().UnixNano())
	} else {
		// A leader known before the observer could report one.
		leader := string(id)
		n.lastLeader.Store(&leader)
	}
	n.batchWG.Add(2)
	go n.batcher()
	go n.completer()
	n.wg.Add(1)
	go n.watch()
	if cfg.SweepInterval > 0 {
		n.wg.Add(1)
		go n.sweeper()
	}
	if n.IsLeader() {
		// Leadership came before the observer was registered.
		n.wg.Add(1)
		go n.announceSelf()
	}
	return n, nil
}

func (n *Node) openRaft() error {
	cfg := &n.cfg
	hlog := newHCLogger(n.log)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.id)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	// Raft requires the lease to be no longer than the heartbeat timeout.
	rc.LeaderLeaseTimeout = min(cfg.LeaderLeaseTimeout, cfg.HeartbeatTimeout)
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	// Let the leader loop gather every Apply waiting into one disk write.
	rc.BatchApplyCh = true
	// A leader removed from the group (CLUSTER FORGET of itself) steps
	// down and stays up as a follower outside the group, as Forget says.
	// Raft's default shuts it down from inside, which leaves the Apply
	// futures still in its queues unanswered: the completer, the clients
	// waiting on them and Close would hang (see close).
	rc.ShutdownOnRemove = false
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("replication: %w", err)
	}

	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.Dir, "raft.db"),
		// NoFreelistSync: bbolt rebuilds the freelist on open instead of
		// writing it on every commit, which keeps each log append small.
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
		NoSync:      cfg.NoSync,
	})
	if err != nil {
		return fmt.Errorf("replication: open raft log in %s: %w", cfg.Dir, err)
	}
	n.store = store
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("replication: snapshot store: %w", err)
	}
	trans, err := n.newTransport(hlog)
	if err != nil {
		return err
	}
	n.trans = trans
	n.raftAddr = string(trans.LocalAddr())
	if n.auth != nil {
		n.log.Info("replication: raft transport authenticated", "mode", n.auth.mode(), "raft_addr", n.raftAddr)
	}

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return err
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("replication: start raft: %w", err)
	}
	n.raft = r
	if cfg.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil {
			_ = r.Shutdown().Error()
			n.raft = nil
			return fmt.Errorf("replication: bootstrap: %w", err)
		}
	}
	return nil
}

func (n *Node) closeStores() {
	if n.trans != nil {
		_ = n.trans.Close()
		// Raft answers heartbeats on the transport's connection goroutine
		// (processHeartbeat), past its shutdown check: one already under
		// way can still write a new term to the store, and panics if the
		// store is closed. Closing the transport ends those goroutines
		// after their current request; give that request time to finish.
		time.Sleep(100 * time.Millisecond)
	}
	if n.store != nil {
		_ = n.store.Close()
	}
}

// Close stops the node. Pipelines not yet proposed are answered
// engine.ErrClosed (nothing was proposed: a retry elsewhere is safe);
// proposed ones are answered as usual once their entries resolve. A leader
// then hands leadership to an up-to-date follower, so a planned restart
// costs clients a few milliseconds rather than an election timeout. Close
// waits for every goroutine the node started. The engine is left open.
func (n *Node) Close() error { return n.close(true) }

func (n *Node) close(handOver bool) error {
	n.closeOnce.Do(func() {
		n.closed.Store(true)
		close(n.stop)
		n.submitMu.Lock()
		n.submitClosed = true
		n.submitMu.Unlock()
		// Every future this node waits on resolves before Shutdown: Raft's
		// Shutdown leaves an Apply future still in its queues (applyCh, the
		// FSM's) unanswered for ever, which would hang the completer or a
		// membership change, and Close with them. While Raft runs each one
		// is bounded: it commits, or is answered not-leader, or leadership
		// lost once the lease runs out. So the entries in flight resolve
		// while this node can still commit them, and proposing stops
		// before a transfer (raft refuses proposals during one).
		n.batchWG.Wait()
		n.drainQueue()
		n.ops.Wait()
		n.wg.Wait()
		if handOver && n.IsLeader() {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Info("replication: no leadership transfer on close", "err", err)
			}
		}
		n.raft.DeregisterObserver(n.observer)
		n.closeErr = n.raft.Shutdown().Error()
		n.closeStores()
		n.eng.SetMaxMemory(n.maxMemory.Load())
	})
	return n.closeErr
}

// drainQueue answers the pipelines the stopped batcher left queued.
func (n *Node) drainQueue() {
	for {
		select {
		case r := <-n.queue:
			r.err = engine.ErrClosed
			r.done <- struct{}{}
		default:
			return
		}
	}
}

// Execute runs a pipeline with the contract of engine.Engine.Execute, as
// cluster mode requires:
//   - On the leader, a pipeline with any write goes whole (reads too, in
//     order) through the Raft log and is answered once committed and
//     applied; a read-only pipeline is answered from the applied state.
//   - On a follower, every command gets an *engine.MovedError naming the
//     leader's client address, except that a read-only pipeline with
//     b.ReadOnly set is answered from the follower's applied state.
//   - With no leader it waits up to ElectionTimeout for one, then answers
//     engine.ErrTryAgain, or engine.ErrClusterDown once the group has had
//     no leader for more than 3 election timeouts.
//   - A proposed pipeline whose commit cannot be confirmed (leadership
//     lost, node shut down) gets engine.ErrOutcomeUnknown: it may or may
//     not have applied, so it is never redirected.
//
// now is when the server received the pipeline. A write's entry is stamped
// with the latest now of the pipelines it carries, and every node applies it
// at that time (never earlier than the time applied before it); reads run at
// now, or at the applied time if that is later.
func (n *Node) Execute(b *engine.Batch, now int64) {
	if n.closed.Load() {
		fillError(b, engine.ErrClosed)
		return
	}
	write := hasWrite(b)
	// A pipeline routes again only when leadership moved before it was
	// proposed; a few rounds cover any realistic churn.
	for range 3 {
		if n.IsLeader() {
			if !write {
				n.eng.Execute(b, max(now, n.fsm.appliedNow.Load()))
				return
			}
			err := n.propose(b, now)
			if err == nil {
				return
			}
			if !errors.Is(err, errNotProposed) {
				fillError(b, err)
				return
			}
			n.awaitTransfer()
			continue
		}
		if !write && b.ReadOnly {
			n.eng.Execute(b, max(now, n.fsm.appliedNow.Load()))
			return
		}
		addr, err := n.leaderClientAddr()
		if errors.Is(err, errSelfLeader) {
			continue
		}
		if err != nil {
			fillError(b, err)
			return
		}
		n.redirect(b, addr)
		return
	}
	fillError(b, engine.ErrTryAgain)
}

func hasWrite(b *engine.Batch) bool {
	for i := range b.Cmds {
		if b.Cmds[i].Writes() {
			return true
		}
	}
	return false
}

func fillError(b *engine.Batch, err error) {
	b.Replies = b.Replies[:0]
	for range b.Cmds {
		b.Replies = append(b.Replies, engine.Reply{Kind: engine.ReplyError, Err: err})
	}
}

// redirect answers every command with MOVED to the leader at addr.
func (n *Node) redirect(b *engine.Batch, addr string) {
	n.stats.redirects.Add(1)
	b.Replies = b.Replies[:0]
	for i := range b.Cmds {
		err := &engine.MovedError{Slot: commandSlot(&b.Cmds[i]), Addr: addr}
		b.Replies = append(b.Replies, engine.Reply{Kind: engine.ReplyError, Err: err})
	}
}

// propose queues b for the batcher and waits until its entry is applied
// (nil: the replies are in b) or failed.
func (n *Node) propose(b *engine.Batch, now int64) error {
	r := requestPool.Get().(*request)
	r.b, r.now, r.err = b, now, nil
	if !n.submit(r) {
		r.b = nil
		requestPool.Put(r)
		return engine.ErrClosed
	}
	<-r.done
	err := r.err
	r.b, r.err = nil, nil
	requestPool.Put(r)
	return err
}

func (n *Node) submit(r *request) bool {
	n.submitMu.RLock()
	defer n.submitMu.RUnlock()
	if n.submitClosed {
		return false
	}
	select {
	case n.queue <- r:
		return true
	case <-n.stop:
		return false
	}
}

// batcher forms Raft entries: it takes as many waiting pipelines as are
// queued (up to MaxBatch commands), stamps the entry with the latest of
// their arrival times, and proposes them as one entry. Up to MaxInflight entries are in flight; while they are, new
// pipelines pile up in the queue and make the next entry bigger, so the
// entry size follows the load with no timer.
func (n *Node) batcher() {
	defer n.batchWG.Done()
	defer close(n.inflight)
	var writes []engine.Command
	sizeHint := 512
	for {
		select {
		case n.slots <- struct{}{}:
		case <-n.stop:
			return
		}
		var first *request
		select {
		case first = <-n.queue:
		case <-n.stop:
			return
		}
		p := &proposal{reqs: make([]*request, 0, 16)}
		p.reqs = append(p.reqs, first)
		cmds := len(first.b.Cmds)
	drain:
		for cmds < n.cfg.MaxBatch {
			select {
			case r := <-n.queue:
				p.reqs = append(p.reqs, r)
				cmds += len(r.b.Cmds)
			default:
				break drain
			}
		}
		if !n.IsLeader() {
			n.finish(p, errNotProposed)
			<-n.slots
			continue
		}

		// Followers need only the writes: reads change no state.
		writes = writes[:0]
		var now int64
		for _, r := range p.reqs {
			now = max(now, r.now)
			for i := range r.b.Cmds {
				if r.b.Cmds[i].Writes() {
					writes = append(writes, r.b.Cmds[i])
				}
			}
		}
		n.seq++
		p.seq = n.seq
		h := batchHeader{now: now, origin: n.origin, seq: p.seq}
		if limit := n.maxMemory.Load(); limit > 0 && n.eng.UsedMemory() >= limit {
			h.flags |= flagOverMemory
		}
		buf := make([]byte, 0, sizeHint)
		buf = appendBatchHeader(buf, h)
		buf = engine.EncodeCommands(buf, writes)
		sizeHint = max(512, len(buf)+len(buf)/4)
		clear(writes) // drop references to the connections' buffers

		n.pendingMu.Lock()
		n.pending[p.seq] = p
		n.pendingMu.Unlock()
		n.stats.entries.Add(1)
		n.stats.commands.Add(uint64(cmds))
		n.inflight <- inflightEntry{p: p, f: n.raft.Apply(buf, 0)}
	}
}

// claim hands the FSM the proposal with this seq, unless it already
// failed (then the FSM applies the entry from its bytes).
func (n *Node) claim(seq uint64) *proposal {
	n.pendingMu.Lock()
	p := n.pending[seq]
	delete(n.pending, seq)
	n.pendingMu.Unlock()
	if p == nil || !p.state.CompareAndSwap(proposalPending, proposalApplied) {
		return nil
	}
	return p
}

// completer waits for proposed entries in order. A successful one was
// answered by the FSM; a failed one is answered here.
func (n *Node) completer() {
	defer n.batchWG.Done()
	for e := range n.inflight {
		err := e.f.Error()
		<-n.slots
		n.pendingMu.Lock()
		delete(n.pending, e.p.seq)
		n.pendingMu.Unlock()
		if !e.p.state.CompareAndSwap(proposalPending, proposalFailed) {
			continue // the FSM applied it and answered
		}
		if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			// Refused before it entered the log: route it again.
			n.finish(e.p, errNotProposed)
			continue
		}
		if err == nil {
			// Cannot happen: a successful Apply ran the FSM, which
			// claimed the proposal. Answer rather than hang.
			n.log.Error("replication: entry committed but not applied here", "seq", e.p.seq)
		} else {
			n.log.Warn("replication: proposed entry's outcome unknown", "seq", e.p.seq, "requests", len(e.p.reqs), "err", err)
		}
		// Proposed and not confirmed: it may still commit under the next
		// leader, so the answer must not invite a blind retry.
		n.stats.unknown.Add(uint64(len(e.p.reqs)))
		n.finish(e.p, engine.ErrOutcomeUnknown)
	}
}

func (n *Node) finish(p *proposal, err error) {
	for _, r := range p.reqs {
		r.err = err
		r.done <- struct{}{}
	}
}

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// leaderClientAddr returns the leader's client address, waiting up to an
// election timeout for a leader (and its address) to be known.
func (n *Node) leaderClientAddr() (string, error) {
	deadline := time.Now().Add(n.cfg.ElectionTimeout)
	for {
		wake := n.leaderWait()
		if n.IsLeader() {
			return "", errSelfLeader
		}
		if _, id := n.raft.LeaderWithID(); id != "" {
			n.noLeaderSince.Store(0)
			if m, ok := n.members.get(string(id)); ok && m.ClientAddr != "" {
				return m.ClientAddr, nil
			}
		} else {
			n.noLeaderSince.CompareAndSwap(0, time.Now().UnixNano())
		}
		left := time.Until(deadline)
		if left <= 0 || n.closed.Load() {
			break
		}
		// Observations can be dropped, so poll as well.
		t := time.NewTimer(min(left, 25*time.Millisecond))
		select {
		case <-wake:
		case <-t.C:
		case <-n.stop:
		}
		t.Stop()
	}
	if n.closed.Load() {
		return "", engine.ErrClosed
	}
	// CLUSTERDOWN once no leader has been known for longer than a few
	// elections with split votes take (a round is 1-2 election timeouts,
	// and a voter must first notice the old leader is gone).
	if since := n.noLeaderSince.Load(); since != 0 && time.Since(time.Unix(0, since)) > 3*(n.cfg.ElectionTimeout+n.cfg.HeartbeatTimeout) {
		return "", engine.ErrClusterDown
	}
	return "", engine.ErrTryAgain
}

func (n *Node) leaderWait() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderChanged
}

// watch follows Raft's leader observations: it wakes waiters, tracks how
// long the group has had no leader, and makes a new leader announce its
// own client address.
func (n *Node) watch() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case o := <-n.obsCh:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				if lo.LeaderID == "" {
					n.noLeaderSince.CompareAndSwap(0, time.Now().UnixNano())
				} else {
					n.noLeaderSince.Store(0)
					n.leaderChanges.Add(1)
					id := string(lo.LeaderID)
					n.lastLeader.Store(&id)
				}
				if string(lo.LeaderID) == n.id {
					n.wg.Add(1)
					go n.announceSelf()
				}
			}
			n.leaderMu.Lock()
			close(n.leaderChanged)
			n.leaderChanged = make(chan struct{})
			n.leaderMu.Unlock()
		}
	}
}

// sweeper frees expired records as of the last applied time.
func (n *Node) sweeper() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
			n.eng.Sweep(n.fsm.appliedNow.Load())
		}
	}
}

// AppliedIndex is the index of the last Raft entry this node's state
// machine has applied. Unlike raft.AppliedIndex, which may count an entry
// the FSM has not yet consumed, it is published only after the entry is
// applied, so two nodes with the same AppliedIndex hold the same state.
func (n *Node) AppliedIndex() uint64 { return n.fsm.appliedIndex.Load() }

// The readiness facts (/readyz, INFO, the raft metrics). Each reads Raft's
// own atomics or a short lock, never waits on Raft's goroutines, so a
// probe answers while Raft is busy.

// HasLeader reports whether this node knows a leader, itself included.
func (n *Node) HasLeader() bool {
	_, id := n.raft.LeaderWithID()
	return id != ""
}

// CommitIndex is the highest Raft index this node knows to be committed.
// A follower learns it from the leader, so a follower cut off from the
// leader does not know how far behind it falls.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// LastLeaderContact is how long ago this node last heard from a leader
// (or granted a candidate its vote), or how long it has been open if it
// never has. Meaningful on a follower; on the leader it is 0.
func (n *Node) LastLeaderContact() time.Duration {
	if n.IsLeader() {
		return 0
	}
	last := n.raft.LastContact()
	if last.IsZero() {
		last = n.opened
	}
	return time.Since(last)
}

// LeaderChanges counts the leaders this node has observed taking office
// since it opened (a loss of the leader is not counted; the next leader
// is). Observations Raft drops when this node is slow to read them are
// not counted either.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// announceSelf records this node's client address in the replicated member
// map if it is missing or stale, so followers can redirect to it.
func (n *Node) announceSelf() {
	defer n.wg.Done()
	want := member{RaftAddr: n.raftAddr, ClientAddr: n.cfg.ClientAddr}
	if m, ok := n.members.get(n.id); ok && m == want {
		return
	}
	err := n.applyMember(memberChange{op: memberSet, id: n.id, raftAddr: want.RaftAddr, clientAddr: want.ClientAddr})
	if err != nil && !n.closed.Load() {
		n.log.Warn("replication: could not announce this node's client address", "err", err)
	}
}

// Stats returns the engine's counters.
func (n *Node) Stats() engine.Stats { return n.eng.Stats() }

// ResetStats zeroes this node's engine counters (CONFIG RESETSTAT is one
// node's, as in Redis).
func (n *Node) ResetStats() { n.eng.ResetStats() }

// Shards is the engine's shard count.
func (n *Node) Shards() int { return n.eng.Shards() }

// MaxMemory is this node's memory limit, 0 for none.
func (n *Node) MaxMemory() int64 { return n.maxMemory.Load() }

// SetMaxMemory sets this node's memory limit. Only the leader's limit
// matters: it decides, per entry, whether new state may be created, and
// every node applies that verdict. Set the same limit on every node, so a
// new leader keeps it.
func (n *Node) SetMaxMemory(v int64) { n.maxMemory.Store(v) }

// ID is this node's Raft server id.
func (n *Node) ID() string { return n.id }

// RaftAddr is the Raft address other members dial (the advertised one).
func (n *Node) RaftAddr() string { return n.raftAddr }

// ClientAddr is the client address this node announces.
func (n *Node) ClientAddr() string { return n.cfg.ClientAddr }

// ReplicationStats are the batcher's counters, for INFO replication.
type ReplicationStats struct {
	Entries        uint64 // batch entries proposed by this node
	Commands       uint64 // commands in those entries
	OutcomeUnknown uint64 // pipelines answered engine.ErrOutcomeUnknown
	Redirects      uint64 // pipelines answered MOVED
}

// ReplicationStats returns the batcher's counters.
func (n *Node) ReplicationStats() ReplicationStats {
	return ReplicationStats{
		Entries:        n.stats.entries.Load(),
		Commands:       n.stats.commands.Load(),
		OutcomeUnknown: n.stats.unknown.Load(),
		Redirects:      n.stats.redirects.Load(),
	}
}

// transferTo hands leadership to the voter id. While the transfer runs,
// Raft refuses new entries, so writes wait for it (see awaitTransfer)
// rather than fail.
func (n *Node) transferTo(id raft.ServerID, addr raft.ServerAddress) bool {
	n.transferring.Store(true)
	_, err := n.await(func() raft.Future { return n.raft.LeadershipTransferToServer(id, addr) })
	// Raft clears its own in-progress mark only after answering the
	// future: writes keep waiting a moment longer rather than use up their
	// rounds against it.
	time.Sleep(20 * time.Millisecond)
	n.transferring.Store(false)
	if err != nil {
		n.log.Info("replication: leadership transfer failed", "to", id, "err", err)
		return false
	}
	return true
}

// awaitTransfer waits, up to an election timeout, for a leadership
// transfer under way to end.
func (n *Node) awaitTransfer() {
	deadline := time.Now().Add(n.cfg.ElectionTimeout)
	for n.transferring.Load() && time.Now().Before(deadline) && !n.closed.Load() {
		time.Sleep(2 * time.Millisecond)
	}
}

// await runs a Raft operation whose future this goroutine waits on (a
// membership or replicated state change, a seat moved, a leadership
// transfer) and returns its future once resolved. Close waits for these
// before it shuts Raft down (see close), and none starts once Close has
// begun: it gets raft.ErrRaftShutdown.
func (n *Node) await(op func() raft.Future) (raft.Future, error) {
	n.submitMu.RLock()
	if n.submitClosed {
		n.submitMu.RUnlock()
		return nil, raft.ErrRaftShutdown
	}
	n.ops.Add(1)
	n.submitMu.RUnlock()
	defer n.ops.Done()
	f := op()
	return f, f.Error()
}
