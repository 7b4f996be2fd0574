package engine

import "github.com/sluicehq/sluice/shard"

// LB.RESERVE and LB.CANCEL: the leaky bucket as a meter (shaping).

// Op numbers of the leaky bucket.
const (
	OpLBReserve Op = 34 // LB.RESERVE
	OpLBCancel  Op = 35 // LB.CANCEL
)

func leakyOps() map[Op]OpSpec { return nil }

func lbRefund(t *shard.Table, e shard.Entry, amount, now int64) Reply { return errReply(ErrWrongType) }

func lbInfo(t *shard.Table, e shard.Entry, now int64, field func(string, Reply)) {}
