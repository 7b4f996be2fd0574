package engine

import (
	"errors"

	"github.com/sluicehq/sluice/shard"
)

// CONC.ACQUIRE, CONC.RELEASE and CONC.RENEW: concurrency limits (leases).

// Op numbers of the concurrency family.
const (
	OpConcAcquire Op = 31 // CONC.ACQUIRE
	OpConcRelease Op = 32 // CONC.RELEASE
	OpConcRenew   Op = 33 // CONC.RENEW
)

// ErrConcRefund: LIMIT.REFUND has nothing to give back on a concurrency key.
var ErrConcRefund = errors.New("LIMIT.REFUND does not apply to a concurrency key; release the lease with CONC.RELEASE")

func concOps() map[Op]OpSpec { return nil }

func concInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {}
