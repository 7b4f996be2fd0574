package engine

import (
	"errors"
	"slices"

	"github.com/sluicehq/sluice/shard"
)

var errUnknownOp = errors.New("unknown operation")

// holdTask lends a shard's table to a coordinator: the owner hands its
// table over and parks until released, so while it waits nobody else
// touches the table and the coordinator has it alone.
type holdTask struct {
	tables  chan<- *shard.Table
	release <-chan struct{}
}

func (h *holdTask) Run(t *shard.Table) {
	h.tables <- t
	<-h.release
}

// held is a set of shards taken in ascending order and released together.
type held struct {
	tables  map[int]*shard.Table
	release chan struct{}
}

// hold takes the shards in ascending order, each one only after the one
// before it is held, so two multi-shard commands can never wait on each
// other in a cycle.
func (e *Engine) hold(shards []int) *held {
	h := &held{tables: make(map[int]*shard.Table, len(shards)), release: make(chan struct{})}
	tables := make(chan *shard.Table)
	for _, s := range shards {
		e.shards[s].Submit(&holdTask{tables: tables, release: h.release})
		h.tables[s] = <-tables
	}
	return h
}

// done releases every shard; the close orders the coordinator's writes
// before the owners' next reads.
func (h *held) done() { close(h.release) }

// executeHeld runs b.Cmds[from:to] (multi-key commands and LIMIT.ALLs) in
// order while holding the union of the shards they touch.
func (e *Engine) executeHeld(b *Batch, from, to int) {
	var shards []int
	for i := from; i < to; i++ {
		for _, s := range e.shardsOf(b.Cmds[i].Sub) {
			if !slices.Contains(shards, s) {
				shards = append(shards, s)
			}
		}
	}
	slices.Sort(shards)
	h := e.hold(shards)
	defer h.done()
	jobs := make(map[int]*shardJob, len(shards))
	for _, s := range shards {
		jobs[s] = &shardJob{e: e, b: b, shard: s}
	}
	for i := from; i < to; i++ {
		c := &b.Cmds[i]
		if c.Op.spec().Keys == KeysLimits {
			b.Replies[i] = e.limitAll(c, b.now, h, jobs)
		} else {
			b.Replies[i] = e.multiKey(c, b.now, h, jobs)
		}
	}
	for s, j := range jobs {
		e.stats[s].allowed.Add(j.allowed)
		e.stats[s].limited.Add(j.limited)
		b.durable = max(b.durable, j.durableSeq)
	}
}

// shardsOf hashes the sub-commands' keys and returns the sorted shards they
// touch.
func (e *Engine) shardsOf(subs []Command) []int {
	var shards []int
	for i := range subs {
		subs[i].hash = shard.Hash(subs[i].Key)
		s := e.shardOf(subs[i].hash)
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	return shards
}

func (e *Engine) allShards() []int {
	all := make([]int, len(e.shards))
	for i := range all {
		all[i] = i
	}
	return all
}

// subsOn lists the sub-commands of c that live on shard s.
func (e *Engine) subsOn(c *Command, s int) []int32 {
	var idx []int32
	for i := range c.Sub {
		if e.shardOf(c.Sub[i].hash) == s {
			idx = append(idx, int32(i))
		}
	}
	return idx
}

// multiKey runs one single-key sub-command per key (DEL, EXISTS, MGET,
// LIMIT.RESET) on the held shards, each shard's part journaled as its own.
func (e *Engine) multiKey(c *Command, now int64, h *held, jobs map[int]*shardJob) Reply {
	replies := make([]Reply, len(c.Sub))
	for _, s := range e.shardsOf(c.Sub) {
		j, idx := jobs[s], e.subsOn(c, s)
		for _, i := range idx {
			replies[i] = j.apply(h.tables[s], &c.Sub[i], now)
		}
		if err := j.journal(c.Sub, replies, idx, now); err != nil {
			e.log.Error("journal append failed", "err", err)
		}
	}
	if c.Multi == MultiArray {
		return Reply{Kind: ReplyArray, Items: replies}
	}
	var sum int64
	for _, r := range replies {
		if r.Kind == ReplyError {
			return r
		}
		sum += r.Int
	}
	return intReply(sum)
}
