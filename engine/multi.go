package engine

import (
	"errors"
	"slices"
	"sync"

	"github.com/tidwall/match"

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
		if c.Op == OpLimitAll {
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

// executeMulti runs a command that spans shards, after every command before
// it in the batch has completed.
func (e *Engine) executeMulti(c *Command, now int64, b *Batch) Reply {
	switch c.Op {
	case OpKeys:
		return e.keys(c, now)
	case OpScan:
		return e.scan(c, now)
	case OpFlushAll:
		return e.flushAll(c, now, b)
	}
	return errReply(errUnknownOp)
}

func (e *Engine) flushAll(c *Command, now int64, b *Batch) Reply {
	e.bigOps.Lock()
	defer e.bigOps.Unlock()
	h := e.hold(e.allShards())
	defer h.done()
	for _, t := range h.tables {
		t.Clear()
	}
	// Journaled while every shard is held, as one record for all.
	j := &shardJob{e: e, b: b, shard: AllShards}
	if err := j.journal([]Command{*c}, []Reply{okReply()}, []int32{0}, now); err != nil {
		e.log.Error("journal append failed", "err", err)
	}
	if b != nil {
		b.durable = max(b.durable, j.durableSeq)
	}
	return okReply()
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

// limitAll decides every limit against one consistent state and applies all
// of them or none. Each limit's reply is its decision at that instant: a
// limit that trips reports its own state, and the others report what they
// would have been, with nothing consumed.
func (e *Engine) limitAll(c *Command, now int64, h *held, jobs map[int]*shardJob) Reply {
	for i := range c.Sub {
		for k := 0; k < i; k++ {
			if string(c.Sub[k].Key) == string(c.Sub[i].Key) {
				return errReply(ErrSameKeyTwice)
			}
		}
	}
	replies := make([]Reply, len(c.Sub))
	firstTrip := -1
	for i := range c.Sub {
		s := e.shardOf(c.Sub[i].hash)
		j := jobs[s]
		// The dry run decides without writing or counting.
		allowed, limited := j.allowed, j.limited
		j.dryRun = true
		replies[i] = j.apply(h.tables[s], &c.Sub[i], now)
		j.dryRun = false
		j.allowed, j.limited = allowed, limited
		if firstTrip < 0 && (replies[i].Kind == ReplyError || replies[i].Dec.Limited) {
			firstTrip = i
		}
	}
	if firstTrip >= 0 {
		if replies[firstTrip].Kind == ReplyError {
			return replies[firstTrip]
		}
		jobs[e.shardOf(c.Sub[firstTrip].hash)].limited++
		return Reply{Kind: ReplyArray, Items: []Reply{intReply(1), intReply(int64(firstTrip)), {Kind: ReplyArray, Items: replies}}}
	}
	for _, s := range e.shardsOf(c.Sub) {
		j, idx := jobs[s], e.subsOn(c, s)
		j.committing = true
		for _, i := range idx {
			replies[i] = j.apply(h.tables[s], &c.Sub[i], now)
		}
		j.committing = false
		// Each shard journals its own part as plain decisions: they were
		// allowed against this state, so replay allows them again.
		if err := j.journal(c.Sub, replies, idx, now); err != nil {
			e.log.Error("journal append failed", "err", err)
		}
	}
	return Reply{Kind: ReplyArray, Items: []Reply{intReply(0), intReply(-1), {Kind: ReplyArray, Items: replies}}}
}

// keysTask collects one shard's keys matching a glob pattern.
type keysTask struct {
	pattern string
	now     int64
	out     [][]byte
	done    *sync.WaitGroup
}

func (k *keysTask) Run(t *shard.Table) {
	t.ForEach(k.now, func(en shard.Entry, _ int64) bool {
		if k.pattern == "*" || match.Match(string(en.Key), k.pattern) {
			k.out = append(k.out, slices.Clone(en.Key))
		}
		return true
	})
	k.done.Done()
}

func (e *Engine) keys(c *Command, now int64) Reply {
	var done sync.WaitGroup
	tasks := make([]keysTask, len(e.shards))
	done.Add(len(tasks))
	for i := range tasks {
		tasks[i] = keysTask{pattern: string(c.Pattern), now: now, done: &done}
		e.shards[i].Submit(&tasks[i])
	}
	done.Wait()
	var items []Reply
	for _, task := range tasks {
		for _, k := range task.out {
			items = append(items, bulkReply(k))
		}
	}
	return Reply{Kind: ReplyArray, Items: items}
}

// scanTask walks part of one shard's hash space.
type scanTask struct {
	c      *Command
	cursor uint64
	now    int64
	out    [][]byte
	next   uint64
	done   chan struct{}
}

func (s *scanTask) Run(t *shard.Table) {
	pattern, typ := string(s.c.Pattern), string(s.c.TypeFilter)
	s.next = t.Scan(s.cursor, int(s.c.N[1]), s.now, func(key []byte, kind shard.Kind) {
		if typ != "" && KindName(kind) != typ {
			return
		}
		if pattern != "" && pattern != "*" && !match.Match(string(key), pattern) {
			return
		}
		s.out = append(s.out, slices.Clone(key))
	})
	close(s.done)
}

// scan serves SCAN. The cursor is shard<<32 | position in that shard's
// hash space; 0 starts and ends the iteration.
func (e *Engine) scan(c *Command, now int64) Reply {
	cursor := uint64(c.N[0])
	s := int(cursor >> 32)
	if s >= len(e.shards) {
		return Reply{Kind: ReplyArray, Items: []Reply{strReply("0"), {Kind: ReplyArray}}}
	}
	task := &scanTask{c: c, cursor: cursor & (1<<32 - 1), now: now, done: make(chan struct{})}
	e.shards[s].Submit(task)
	<-task.done
	var next uint64
	switch {
	case task.next < 1<<32:
		next = uint64(s)<<32 | task.next
	case s+1 < len(e.shards):
		next = uint64(s+1) << 32
	}
	items := make([]Reply, len(task.out))
	for i, k := range task.out {
		items[i] = bulkReply(k)
	}
	return Reply{Kind: ReplyArray, Items: []Reply{
		strReply(formatUint(next)), {Kind: ReplyArray, Items: items},
	}}
}
