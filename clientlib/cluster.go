package clientlib

import (
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
// on a Sluice cluster: opt (not modified) with ContextTimeoutEnabled, so
// that the Limiter's timeout applies to the socket and calls run on the
// caller's goroutine, and ClusterStateReloadInterval
// DefaultClusterStateReloadInterval unless set. Everything else is
// go-redis's.
//
// When a leader is killed, the first call that fails asks go-redis to
// reload its slot map (see the package documentation); the calls that
// follow reach the new leader once a survivor names it, within about a
// second of the kill (docs/benchmarks.md, "Cluster mode"). go-redis
// resends a command whose connection broke to another node: decisions
// carry a request id, so such a resend is charged once.
func NewClusterClient(opt *redis.ClusterOptions) *redis.ClusterClient {
	o := *opt
	o.ContextTimeoutEnabled = true
	if o.ClusterStateReloadInterval == 0 {
		o.ClusterStateReloadInterval = DefaultClusterStateReloadInterval
	}
	return redis.NewClusterClient(&o)
}
