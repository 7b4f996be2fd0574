package replication

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func concAcquire(key string, max int64, id string) engine.Command {
	return engine.Command{Op: engine.OpConcAcquire, Key: []byte(key), N: [4]int64{max, hour}, Value: []byte(id)}
}

func concID(key, id string, op engine.Op) engine.Command {
	return engine.Command{Op: op, Key: []byte(key), N: [4]int64{hour}, Value: []byte(id)}
}

// Leases replicate: the followers hold every record byte for byte as the
// leader does, the ids the leader made included (they are made again from
// the replicated state and time), answer LIMIT.INFO on them under
// READONLY, and redirect every CONC command, refusals included.
func TestConcLeasesReplicate(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	made, refused := 0, 0
	for i := range 30 {
		key := fmt.Sprintf("conc:%d", i%3)
		b := run(l,
			concAcquire(key, 4, ""),
			concAcquire(key, 4, fmt.Sprintf("w%d", i%5)),
			concID(key, fmt.Sprintf("w%d", (i+2)%5), engine.OpConcRenew),
			concID(key, fmt.Sprintf("w%d", (i+4)%5), engine.OpConcRelease))
		for j, r := range b.Replies[:2] {
			if r.Kind != engine.ReplyArray || len(r.Items) != 4 {
				t.Fatalf("pipeline %d reply %d: %+v", i, j, r)
			}
			switch {
			case r.Items[0].Int == 0:
				refused++
			case j == 0:
				made++
			}
		}
	}
	if made == 0 || refused == 0 {
		t.Fatalf("%d ids made, %d acquisitions refused: the test needs both", made, refused)
	}
	c.waitConverged()
	for _, n := range c.nodes[1:] {
		sameState(t, c.nodes[0], n)
	}
	for _, f := range c.live() {
		if f == l {
			continue
		}
		if h, ok := infoField(runReadOnly(f, limitInfo("conc:0")).Replies[0], "holders"); !ok || h != 4 {
			t.Errorf("READONLY LIMIT.INFO on a follower: holders %d (%v), want 4", h, ok)
		}
		b := runReadOnly(f, concAcquire("conc:0", 4, ""), concID("conc:0", "w1", engine.OpConcRelease), concID("conc:0", "w1", engine.OpConcRenew))
		for i, r := range b.Replies {
			if m, ok := isMoved(r.Err); !ok || m.Addr != l.ClientAddr() {
				t.Errorf("follower reply %d = %+v, want MOVED to the leader", i, r)
			}
		}
	}
}
