package replication

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestReadinessFactsOfACutOffFollower: the facts /readyz reads. A follower
// whose links are cut loses its leader and its last contact grows past the
// heartbeat timeout, while the other two still form a group with a leader;
// after the links heal it knows a leader again, hears from it, and has
// applied what was committed meanwhile. Each node counts the leader it saw
// take office. (That the connected nodes stay ready throughout is
// cmd/sluice-server's TestReadyzOfACutOffFollower, with Raft timings a
// loaded test machine keeps.)
func TestReadinessFactsOfACutOffFollower(t *testing.T) {
	nc := newNetCluster(t, 3)
	leader := nc.leader()
	var cut, other *testNode
	for _, n := range nc.nodes {
		if n != leader {
			if cut == nil {
				cut = n
			} else {
				other = n
			}
		}
	}
	for _, n := range nc.nodes {
		if !n.HasLeader() || n.LeaderChanges() < 1 {
			t.Fatalf("node %s: has leader %v, leader changes %d", n.ID(), n.HasLeader(), n.LeaderChanges())
		}
	}
	if d := leader.LastLeaderContact(); d != 0 && leader.IsLeader() {
		t.Fatalf("the leader reports a last contact %v ago; want 0", d)
	}

	nc.isolate(cut, true)
	sluicetest.WaitFor(t, 10*time.Second, "the cut-off follower to lose its leader", func() bool { return !cut.HasLeader() })
	hb := cut.cfg.HeartbeatTimeout
	if hb == 0 {
		hb = DefaultHeartbeatTimeout
	}
	sluicetest.WaitFor(t, 10*time.Second, "its last contact to pass the heartbeat timeout", func() bool { return cut.LastLeaderContact() > hb })
	var lead *testNode
	sluicetest.WaitFor(t, 10*time.Second, "the connected two to have a leader", func() bool {
		for _, n := range []*testNode{leader, other} {
			if n.IsLeader() {
				lead = n
				return true
			}
		}
		return false
	})
	// Committed while the follower is away.
	if r := run(lead, slCheck("while-cut", 10, 1)).Replies[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	committed := lead.CommitIndex()

	nc.isolate(cut, false)
	sluicetest.WaitFor(t, 20*time.Second, "the healed follower to know a leader and apply what it missed", func() bool {
		return cut.HasLeader() && cut.LastLeaderContact() < hb && cut.AppliedIndex() >= committed
	})
	if cut.CommitIndex() < cut.AppliedIndex() {
		t.Fatalf("commit index %d below applied index %d", cut.CommitIndex(), cut.AppliedIndex())
	}
}
