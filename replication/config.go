package replication

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// Config configures a Node. Dir and ClientAddr are required; every other
// field has a usable zero value, filled in by Open.
type Config struct {
	// ID is this node's Raft server id (40 hex characters, as Redis Cluster
	// node ids are). Default: the id stored in Dir/node-id, or a new random
	// one written there. An ID that differs from the stored one is refused:
	// the log in Dir belongs to the other node.
	ID string
	// Dir holds the Raft log and stable store (raft.db), the snapshots and
	// node-id. Required.
	Dir string
	// RaftAddr is the host:port the Raft transport binds. Default
	// "127.0.0.1:0" (loopback, any free port; for tests).
	RaftAddr string
	// AdvertiseRaftAddr is the host:port other members dial. Default: the
	// bound address, which must then not be a wildcard like 0.0.0.0.
	AdvertiseRaftAddr string
	// ClientAddr is the client-facing host:port this node announces; a
	// follower names the leader's in MOVED replies. Required.
	ClientAddr string
	// Bootstrap makes a node with no Raft state start a new group with
	// itself as the only voter. Ignored when Dir already holds state.
	Bootstrap bool

	// HeartbeatTimeout is how long a follower waits without hearing from
	// the leader before it starts an election. Default
	// DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes. Default
	// DefaultElectionTimeout. It is also how long a write waits for a leader to appear
	// before it is answered TRYAGAIN.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader keeps leading without
	// contact with a quorum; then it steps down and stops deciding.
	// Default DefaultLeaderLease.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long an idle leader waits before telling
	// followers the commit index, i.e. how stale an idle follower's reads
	// can be. Default 20ms.
	CommitTimeout time.Duration
	// MaxBatch is the number of commands after which the batcher stops
	// adding waiting pipelines to one Raft entry. Default 4096.
	MaxBatch int
	// MaxInflight is the number of Raft entries the leader keeps proposed
	// but not yet applied. Default 1: while one entry commits the next one
	// fills, and each entry costs fsyncs on every node, so fewer, bigger
	// entries win wherever the disk is the bottleneck (see DESIGN.md).
	MaxInflight int
	// SnapshotThreshold is the number of new log entries after which a
	// snapshot is taken. Default 1024.
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked. Default 30s.
	SnapshotInterval time.Duration
	// TrailingLogs is the number of entries kept after a snapshot, so a
	// briefly absent follower catches up from the log instead of a whole
	// snapshot. Default 1024.
	TrailingLogs uint64
	// NoSync skips fsync in the log store. Unsafe: a machine crash can lose
	// acknowledged decisions. Default false.
	NoSync bool
	// State, when set, is server state outside the engine that every
	// member must hold the same (the ACL users): it changes only through
	// Replicate, and travels whole in snapshots. Default none.
	State ReplicatedState
	// Clock is the server's clock: the node carries every applied time
	// forward into it, so a follower that becomes leader never stamps an
	// entry earlier than one it has applied, and reads never run behind
	// the applied state. Default: a new system clock.
	Clock *clock.Clock
	// SweepInterval is how often the node frees expired records, as of
	// the last applied time (never the local clock: a follower must not
	// free a key the log still treats as live). Default 100ms; negative
	// disables.
	SweepInterval time.Duration
	// Logger receives the node's and Raft's log lines; nil discards.
	Logger *slog.Logger

	// PeerTLS, when set, makes every Raft connection mutual TLS (1.2 or
	// later) against the cluster CA: the production setting. The files
	// are read by Open; a missing or mismatched one fails it.
	PeerTLS *PeerTLS
	// Secret, when set, makes both ends of every Raft connection prove
	// they know it (HMAC challenge-response; the secret never goes on the
	// wire) before any Raft traffic. It authenticates connections but does
	// not encrypt them: for quick starts on a network where nobody can
	// intercept traffic. With PeerTLS as well, a peer needs both: the
	// secret handshake runs inside TLS. At least MinSecretLen bytes; the
	// same on every node.
	//
	// With neither PeerTLS nor Secret, Open refuses (ErrProtectedMode) a
	// RaftAddr or AdvertiseRaftAddr that is not a loopback address.
	Secret []byte

	// slots are the group's hash slots (Groups sets them; a lone node
	// owns all). stream, when set, is the group's share of a listener
	// several groups use (Groups); the node's transport takes it instead
	// of listening itself.
	slots  engine.SlotRange
	stream raft.StreamLayer

	// addressProvider, when set, overrides the address dialled for a
	// member: tests route each link through a proxy they can cut.
	addressProvider raft.ServerAddressProvider
	// handshakeTimeout bounds one Raft connection's authentication;
	// maxHandshakes and maxHandshakesPerHost cap the connections
	// authenticating at once, in all and per remote IP. Tests shorten
	// them; defaults defaultHandshakeTimeout and friends.
	handshakeTimeout     time.Duration
	maxHandshakes        int
	maxHandshakesPerHost int
}

// ReplicatedState is state beside the engine's that the group replicates
// (the server's users). Its methods are called from the FSM's goroutine,
// in log order, identically on every node.
type ReplicatedState interface {
	// Apply applies one committed change, as Replicate proposed it.
	Apply(change []byte) error
	// Snapshot returns the whole state, for a Raft snapshot.
	Snapshot() []byte
	// Restore replaces the state with a Snapshot's.
	Restore(state []byte) error
}

// The default Raft timings. hashicorp/raft's follower notices a silent
// leader on the first tick of a timer of [heartbeat, 2 x heartbeat) after
// the heartbeat timeout has passed, so a crashed leader is replaced after
// one to three heartbeat timeouts: with 300ms, a median of 0.65 s and a
// maximum of 0.86 s over 20 crashes under load (BenchmarkFailover; 500ms
// gave 1.0 s and 1.41 s), below the 1.5 s a client should wait at worst.
// Heartbeats go out every tenth of the timeout, so a follower starts an
// election only after about ten are missed. The lease is half the
// heartbeat timeout: a leader cut off from its majority stops deciding
// before any follower can even start an election.
const (
	DefaultHeartbeatTimeout = 300 * time.Millisecond
	DefaultElectionTimeout  = 300 * time.Millisecond
	DefaultLeaderLease      = 150 * time.Millisecond
)

// Other defaults.
const (
	defaultRaftAddr          = "127.0.0.1:0"
	defaultCommitTimeout     = 20 * time.Millisecond
	defaultMaxBatch          = 4096
	defaultMaxInflight       = 1
	defaultSnapshotThreshold = 1024
	defaultSnapshotInterval  = 30 * time.Second
	defaultTrailingLogs      = 1024
	defaultSweepInterval     = 100 * time.Millisecond
)

func (c *Config) setDefaults() error {
	if c.Dir == "" {
		return errors.New("replication: Config.Dir is required")
	}
	if c.ClientAddr == "" {
		return errors.New("replication: Config.ClientAddr is required")
	}
	if c.RaftAddr == "" {
		c.RaftAddr = defaultRaftAddr
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDur(&c.ElectionTimeout, DefaultElectionTimeout)
	setDur(&c.LeaderLeaseTimeout, DefaultLeaderLease)
	setDur(&c.CommitTimeout, defaultCommitTimeout)
	setDur(&c.SnapshotInterval, defaultSnapshotInterval)
	if c.MaxBatch <= 0 {
		c.MaxBatch = defaultMaxBatch
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = defaultMaxInflight
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = defaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = defaultTrailingLogs
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = defaultSweepInterval
	}
	if c.slots == (engine.SlotRange{}) {
		c.slots = engine.AllSlots
	}
	if c.Clock == nil {
		c.Clock = clock.New(nil)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	setDur(&c.handshakeTimeout, defaultHandshakeTimeout)
	if c.maxHandshakes <= 0 {
		c.maxHandshakes = defaultMaxHandshakes
	}
	if c.maxHandshakesPerHost <= 0 {
		c.maxHandshakesPerHost = defaultMaxHandshakesPerHost
	}
	return nil
}

// nodeID returns the id for the node whose data lives in dir, creating and
// storing one when neither the config nor the directory has it.
func nodeID(dir, want string) (string, error) {
	path := filepath.Join(dir, "node-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		have := strings.TrimSpace(string(b))
		if want != "" && want != have {
			return "", fmt.Errorf("replication: %s belongs to node %s, not %s", dir, have, want)
		}
		return have, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id := want
	if id == "" {
		var r [20]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		id = hex.EncodeToString(r[:])
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}
