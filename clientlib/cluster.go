package clientlib

import (
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultClusterStateReloadInterval is how old NewClusterClient lets its
// slot map grow before reloading it unasked. go-redis's own default is a
// minute; the Limiter also asks for a reload on every failure, so this
// bounds only how long a topology change that causes no error (a leader
// moved by a rebalance while this process was idle) goes unseen. A reload
// is one CLUSTER SLOTS to one node.
const DefaultClusterStateReloadInterval = 5 * time.Second

// NewClusterClient returns a go-redis ClusterClient set up for a Limiter
// on a Sluice cluster: opt (not modified) with
//
//   - ContextTimeoutEnabled, so that the Limiter's timeout applies to the
//     socket and calls run on the caller's goroutine;
//   - ClusterStateReloadInterval DefaultClusterStateReloadInterval unless
//     set;
//   - DialerRetries 1 unless set: go-redis's 5 attempts 100 ms apart spend
//     half a second on a dead leader, and a slot-map reload that asks the
//     dead node first waits them out before it asks a survivor;
//   - its own copy of Addrs: go-redis (v9.23) appends the nodes it learns
//     to the slice it is given, so two clients built from one slice would
//     write the same array.
//
// Everything else is go-redis's. When a leader is killed, the first call
// that fails asks go-redis to reload its slot map (see the package
// documentation), and the calls that follow reach the new leader once a
// survivor names it (docs/benchmarks.md, "Failover seen from the clients").
// go-redis resends a command whose connection broke to another node:
// decisions carry a request id, so such a resend is charged once.
func NewClusterClient(opt *redis.ClusterOptions) *redis.ClusterClient {
	o := *opt
	o.ContextTimeoutEnabled = true
	if o.ClusterStateReloadInterval == 0 {
		o.ClusterStateReloadInterval = DefaultClusterStateReloadInterval
	}
	if o.DialerRetries == 0 {
		o.DialerRetries = 1
	}
	o.Addrs = slices.Clip(slices.Clone(opt.Addrs))
	return redis.NewClusterClient(&o)
}
