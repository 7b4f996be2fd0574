package replication

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
)

// membershipTimeout bounds one membership change (enqueueing it; the
// commit itself is bounded by the leader lease).
const membershipTimeout = 10 * time.Second

// Join adds the node id as a voter reachable at raftAddr, with clients at
// clientAddr. It is idempotent: joining a node already present with the
// same addresses changes nothing, and joining it with new addresses
// updates them. Only the leader can do it; elsewhere it returns an
// *engine.MovedError naming the leader (or ErrTryAgain/ErrClusterDown).
func (n *Node) Join(id, raftAddr, clientAddr string) error {
	return n.join(id, raftAddr, clientAddr, true)
}

// join is Join, adding a new member as a voter or as a non-voter (which
// copies the log but does not count toward a quorum). A member already
// present at raftAddr keeps its suffrage.
func (n *Node) join(id, raftAddr, clientAddr string, voter bool) error {
	if id == "" || raftAddr == "" || clientAddr == "" {
		return errors.New("replication: join needs a node id, a raft address and a client address")
	}
	if err := n.leaderOrRedirect(); err != nil {
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return n.raftError("join", err)
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id && string(s.Address) == raftAddr && (s.Suffrage == raft.Voter || !voter) {
			present = true
		}
	}
	if !present {
		// For an id already present, AddVoter updates its address.
		add, kind := n.raft.AddVoter, "voter"
		if !voter {
			add, kind = n.raft.AddNonvoter, "non-voter"
		}
		if _, err := n.await(func() raft.Future {
			return add(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout)
		}); err != nil {
			return n.raftError("join", err)
		}
		n.log.Info("replication: added "+kind, "id", id, "raft_addr", raftAddr)
	}
	want := member{RaftAddr: raftAddr, ClientAddr: clientAddr}
	if m, ok := n.members.get(id); ok && m == want {
		return nil
	}
	return n.applyMember(memberChange{op: memberSet, id: id, raftAddr: raftAddr, clientAddr: clientAddr})
}

// Forget removes the node id from the group; idempotent. Only the leader
// can do it (see Join). A leader that forgets itself steps down once the
// change commits.
func (n *Node) Forget(id string) error {
	if err := n.leaderOrRedirect(); err != nil {
		return err
	}
	// Drop the client address first: while this leader still leads, so the
	// entry can commit even when id is the leader itself.
	if _, ok := n.members.get(id); ok {
		if err := n.applyMember(memberChange{op: memberRemove, id: id}); err != nil {
			return err
		}
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return n.raftError("forget", err)
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) != id {
			continue
		}
		if _, err := n.await(func() raft.Future { return n.raft.RemoveServer(s.ID, 0, membershipTimeout) }); err != nil {
			return n.raftError("forget", err)
		}
		n.log.Info("replication: removed server", "id", id)
	}
	return nil
}

// Replicate commits a change to Config.State through the log and returns
// once this node has applied it (with the state's error, if it refused the
// change). Only the leader can; elsewhere it returns the *engine.MovedError
// a write would get, or TRYAGAIN/CLUSTERDOWN.
func (n *Node) Replicate(change []byte) error {
	if n.cfg.State == nil {
		return errors.New("replication: this node has no replicated state")
	}
	if err := n.leaderOrRedirect(); err != nil {
		return err
	}
	f, err := n.await(func() raft.Future { return n.raft.Apply(append([]byte{entryState}, change...), membershipTimeout) })
	if err != nil {
		return n.raftError("state change", err)
	}
	if err, ok := f.(raft.ApplyFuture).Response().(error); ok {
		return err
	}
	return nil
}

func (n *Node) applyMember(m memberChange) error {
	if _, err := n.await(func() raft.Future { return n.raft.Apply(encodeMember(m), membershipTimeout) }); err != nil {
		return n.raftError("membership change", err)
	}
	return nil
}

// leaderOrRedirect is nil on the leader, else the error a client should
// get: MOVED to the leader, or TRYAGAIN/CLUSTERDOWN.
func (n *Node) leaderOrRedirect() error {
	if n.closed.Load() {
		return engine.ErrClosed
	}
	if n.IsLeader() {
		return nil
	}
	addr, err := n.leaderClientAddr()
	switch {
	case errors.Is(err, errSelfLeader):
		return nil
	case err != nil:
		return err
	}
	return &engine.MovedError{Slot: n.cfg.slots.First, Addr: addr}
}

// raftError maps a failed membership operation. These are idempotent, so
// a caller may simply retry.
func (n *Node) raftError(op string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		if e := n.leaderOrRedirect(); e != nil {
			return e
		}
		return engine.ErrTryAgain
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("replication: %s: %w", op, engine.ErrOutcomeUnknown)
	case errors.Is(err, raft.ErrRaftShutdown):
		return engine.ErrClosed
	}
	return fmt.Errorf("replication: %s: %w", op, err)
}

// ClusterView describes the group as this node sees it, for CLUSTER, ROLE
// and INFO replication. Applied is known only for this node; the other
// members' entries leave it 0.
func (n *Node) ClusterView() engine.ClusterView {
	v := engine.ClusterView{
		State:       n.raft.State().String(),
		Term:        n.raft.CurrentTerm(),
		CommitIndex: n.raft.CommitIndex(),
		Applied:     n.AppliedIndex(),
		Slots:       n.cfg.slots,
	}
	_, leaderID := n.raft.LeaderWithID()
	if last := n.lastLeader.Load(); leaderID == "" && last != nil {
		v.LastLeaderID = *last
	}
	v.Self = engine.NodeInfo{
		ID: n.id, ClientAddr: n.cfg.ClientAddr, RaftAddr: n.raftAddr,
		Leader: string(leaderID) == n.id, Applied: v.Applied,
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return v
	}
	for _, s := range cf.Configuration().Servers {
		info := engine.NodeInfo{
			ID:       string(s.ID),
			RaftAddr: string(s.Address),
			Leader:   s.ID == leaderID,
			Voter:    s.Suffrage == raft.Voter,
		}
		if m, ok := n.members.get(info.ID); ok {
			info.ClientAddr = m.ClientAddr
		}
		if info.ID == n.id {
			info.ClientAddr = n.cfg.ClientAddr
			info.Applied = v.Applied
			v.Self = info
		}
		if info.Leader {
			v.Leader = info
		}
		v.Nodes = append(v.Nodes, info)
	}
	return v
}
