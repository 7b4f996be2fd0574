package engine

import (
	"errors"
	"strconv"
)

// Errors of cluster mode live here, so that the server can match them
// without importing replication.

// MovedError redirects a client to the leader of the key's slot; the
// server sends it in the form Redis Cluster clients follow
// (-MOVED <slot> <host:port>).
type MovedError struct {
	Slot int
	Addr string
}

func (m *MovedError) Error() string {
	return "slot " + strconv.Itoa(m.Slot) + " is served at " + m.Addr
}

var (
	// ErrOutcomeUnknown: leadership was lost after the batch was proposed
	// and before it was known to commit. It may or may not have applied;
	// a redirect here would invite a retry that charges twice.
	ErrOutcomeUnknown = errors.New("outcome unknown: leadership lost before commit; do not retry blindly")
	// ErrTryAgain: no leader is known yet (an election is running).
	ErrTryAgain = errors.New("no leader is elected yet; retry shortly")
	// ErrClusterDown: no leader for longer than an election should take.
	ErrClusterDown = errors.New("the cluster has no quorum")
	// ErrCrossSlot: a command's keys belong to different Raft groups, so
	// no one leader can decide it; hash tags ({user:42}) keep keys
	// together.
	ErrCrossSlot = errors.New("keys in request don't hash to the same slot")
	// ErrNonLocalKey: a script called a command on a key of another
	// group than the one its declared keys put it on.
	ErrNonLocalKey = errors.New("Script attempted to access a non local key in a cluster node script")
	// ErrTxKeyspace: a transaction queued KEYS, SCAN or FLUSHALL on a node
	// of several groups, where a transaction runs on one group and such a
	// command would reach the others' keys.
	ErrTxKeyspace = errors.New("KEYS, SCAN, FLUSHALL and FLUSHDB cannot run inside MULTI on a cluster of several groups (a transaction runs on one group); send them outside MULTI")
)

// SlotRange is a contiguous range of hash slots, both ends included.
type SlotRange struct{ First, Last int }

// AllSlots is the range of a cluster with one group.
var AllSlots = SlotRange{0, Slots - 1}

// Holds reports whether slot lies in r; the zero range holds every slot.
func (r SlotRange) Holds(slot int) bool {
	return r == SlotRange{} || (slot >= r.First && slot <= r.Last)
}

// NodeInfo describes one member of a replication group.
type NodeInfo struct {
	ID         string // node id (40 hex characters, as Redis Cluster uses)
	ClientAddr string // host:port clients connect to
	RaftAddr   string
	Leader     bool
	Voter      bool
	Applied    uint64 // last Raft index applied, when known
}

// ClusterView is what CLUSTER, ROLE and INFO replication report.
type ClusterView struct {
	Self   NodeInfo
	Leader NodeInfo // zero when no leader is known
	// LastLeaderID, while no leader is known, is the leader last known
	// (empty when there was none): CLUSTER SLOTS names it as the master
	// during an election, as Redis Cluster names a failed master.
	LastLeaderID string
	Nodes        []NodeInfo
	State        string // "Leader", "Follower", "Candidate", "Shutdown"
	// Slots are the group's slots.
	Slots       SlotRange
	Term        uint64
	CommitIndex uint64
	Applied     uint64
}

// Clustered is implemented by a backend that runs in cluster mode.
type Clustered interface {
	ClusterView() ClusterView
	// Join adds a voter; idempotent for a node already present with the
	// same addresses. Only the leader can do it.
	Join(id, raftAddr, clientAddr string) error
	// Forget removes a node; idempotent.
	Forget(id string) error
}
