package replication

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestRestrictedUsersEvalRoutesByItsKeys: an ACL-restricted user's EVAL
// carries the user's name in its Key; it is routed by its declared keys
// alone (it was once routed by the name too: CROSSSLOT, or the wrong
// group).
func TestRestrictedUsersEvalRoutesByItsKeys(t *testing.T) {
	gs := &Groups{nodes: make([]*Node, 3)}
	for i := range 50 {
		k := []byte(fmt.Sprint("k", i))
		c := engine.Command{Op: engine.OpEval, Key: []byte("alice"), Sub: []engine.Command{{Op: engine.OpScriptKey, Key: k}}}
		if g := gs.route(&c); g != gs.GroupOf(k) {
			t.Fatalf("EVAL by user alice on %s (group %d) routes to %d", k, gs.GroupOf(k), g)
		}
		// A follower's MOVED names the key's slot, not the user name's.
		if s := commandSlot(&c); s != KeySlot(k) {
			t.Fatalf("MOVED for EVAL by user alice on %s names slot %d, want %d", k, s, KeySlot(k))
		}
	}
}
