package replication

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// A seat moved to a non-voter that is down: with one voter already down,
// the group has 2 of 4 voters alive and no quorum.
func TestGroupsReviewBalancerPromotesDeadNonVoter(t *testing.T) {
	nodes := startGroupsCluster(t, 4, 2, false, nil)
	for g := range 2 {
		if nv := len(nodes[0].Group(g).ClusterView().Nodes); nv != 4 {
			t.Fatalf("group %d: %d members", g, nv)
		}
		if v := nodes[0].Group(g).voters(); v != 3 {
			t.Fatalf("group %d: %d voters", g, v)
		}
	}
	k := keyOfGroup("q", 0, 2)
	if r := run(nodes[0], fwCheck(k, 100, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
		t.Fatalf("before: %+v", r)
	}
	nodes[3].Close() // the non-voter is down
	nodes[2].Close() // and one voter: 2 of 3 voters alive, the groups still work
	time.Sleep(500 * time.Millisecond)
	if r := run(nodes[0], fwCheck(k, 100, 1)).Replies[0]; r.Kind != engine.ReplyDecision {
		t.Fatalf("with one voter down: %+v", r)
	}
	moved := nodes[0].balanceSeats() // one balancer round
	t.Logf("balanceSeats changed a seat: %v; group 0 voters now %d", moved, nodes[0].Group(0).voters())
	time.Sleep(3 * time.Second)
	var r engine.Reply
	for _, n := range nodes[:2] {
		r = run(n, fwCheck(k, 100, 1)).Replies[0]
		if r.Kind == engine.ReplyDecision {
			return
		}
	}
	t.Fatalf("after one balancer round, group 0 cannot decide: %v", r.Err)
}
