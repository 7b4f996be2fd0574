package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestFailoverSmoke runs the failover experiment in smoke mode: two fresh
// groups of real sluice-server processes, each leader killed with SIGKILL
// under load. The server, clientlib and go-redis with its fastest settings
// must all be answered again within the wait, and the limited key must
// never have admitted more than its limit.
func TestFailoverSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two three-node groups and kills their leaders")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := newExpEnv(ExperimentConfig{SluiceServer: sluicetest.Binary(t), Smoke: true, Log: testLog{t}})
	t.Cleanup(func() {
		if err := env.close(); err != nil {
			t.Errorf("stop servers: %v", err)
		}
	})
	r, err := runFailover(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kills) != failoverKillsSmoke {
		t.Fatalf("%d kills: %+v", len(r.Kills), r.Kills)
	}
	for _, k := range r.Kills {
		if k.Leader == "" || k.NewLeader == "" || k.Leader == k.NewLeader {
			t.Errorf("kill %d: leader %q, then %q", k.Index, k.Leader, k.NewLeader)
		}
		for _, m := range []int{measureServer, measureClientlib, measureGoRedisFast} {
			if k.Took[m] <= 0 || k.Took[m] > k.Waited[m] {
				t.Errorf("kill %d: %s took %v (waited %v)", k.Index, measureShort[m], k.Took[m], k.Waited[m])
			}
		}
		// A decision cannot be answered before a survivor decides.
		if k.Took[measureGoRedisFast] >= 0 && k.Took[measureGoRedisFast] < k.Took[measureServer]-50*time.Millisecond {
			t.Errorf("kill %d: go-redis answered %v after the kill, before any survivor (%v)", k.Index, k.Took[measureGoRedisFast], k.Took[measureServer])
		}
		c := k.Limited
		if c.Allowed > failoverLimit || c.Charged > failoverLimit || c.Allowed < c.Charged-c.Unknown || c.Allowed > c.Charged {
			t.Errorf("kill %d: limited key %+v, limit %d", k.Index, c, failoverLimit)
		}
		if k.LoadAnswered == 0 {
			t.Errorf("kill %d: no load", k.Index)
		}
	}
	rep, err := r.report()
	checkReport(t, "failover", rep, err)
}
