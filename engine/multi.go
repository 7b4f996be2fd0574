package engine

import (
	"errors"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/shard"
	"github.com/tidwall/match"
)

var errUnknownOp = errors.New("unknown operation")

// lockStepTask runs one shard's part of a command that must see several
// shards at one instant. The owner runs prepare, reports ready, and then
// waits for the coordinator's verdict before running commit: while it
// waits, nothing else touches its table.
type lockStepTask struct {
	prepare func(t *shard.Table)
	commit  func(t *shard.Table)
	ready   chan<- struct{}
	release <-chan struct{}
	done    *sync.WaitGroup
}

func (l *lockStepTask) Run(t *shard.Table) {
	l.prepare(t)
	l.ready <- struct{}{}
	<-l.release
	if l.commit != nil {
		l.commit(t)
	}
	l.done.Done()
}

// lockStep takes the shards in ascending order, each one only after the one
// before it is held, so two multi-shard commands can never wait on each
// other in a cycle. It runs prepare on every shard, then decide, then
// commit, and releases all shards together.
func (e *Engine) lockStep(shards []int, prepare func(s int, t *shard.Table), decide func(), commit func(s int, t *shard.Table)) {
	ready := make(chan struct{})
	release := make(chan struct{})
	var done sync.WaitGroup
	done.Add(len(shards))
	for _, s := range shards {
		task := &lockStepTask{ready: ready, release: release, done: &done}
		task.prepare = func(t *shard.Table) { prepare(s, t) }
		if commit != nil {
			task.commit = func(t *shard.Table) { commit(s, t) }
		}
		e.shards[s].Submit(task)
		<-ready
	}
	if decide != nil {
		decide()
	}
	close(release)
	done.Wait()
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
	case OpMulti:
		return e.multiKey(c, now, b)
	case OpLimitAll:
		return e.limitAll(c, now, b)
	case OpKeys:
		return e.keys(c, now)
	case OpScan:
		return e.scan(c, now)
	case OpFlushAll:
		return e.flushAll(c, now, b)
	}
	return errReply(errUnknownOp)
}

// multiJobs makes one job per shard for a multi-shard command, with the
// indexes of the sub-commands that shard owns.
func (e *Engine) multiJobs(subs []Command, b *Batch, dryRun bool) ([]int, map[int]*shardJob, map[int][]int32) {
	shards := e.shardsOf(subs)
	jobs := make(map[int]*shardJob, len(shards))
	idx := make(map[int][]int32, len(shards))
	for _, s := range shards {
		jobs[s] = &shardJob{e: e, b: b, shard: s, dryRun: dryRun}
	}
	for i := range subs {
		s := e.shardOf(subs[i].hash)
		idx[s] = append(idx[s], int32(i))
	}
	return shards, jobs, idx
}

// noteDurable folds the jobs' journal positions into the batch's.
func noteDurable(b *Batch, jobs map[int]*shardJob) {
	if b == nil {
		return
	}
	for _, j := range jobs {
		b.durable = max(b.durable, j.durableSeq)
	}
}

func (e *Engine) flushAll(c *Command, now int64, b *Batch) Reply {
	e.bigOps.Lock()
	defer e.bigOps.Unlock()
	j := &shardJob{e: e, b: b, shard: AllShards}
	e.lockStep(e.allShards(), func(_ int, t *shard.Table) { t.Clear() }, func() {
		// Journaled while every shard is held, as one record for all.
		if err := j.journal([]Command{*c}, []Reply{okReply()}, []int32{0}, now); err != nil {
			e.log.Error("journal append failed", "err", err)
		}
	}, nil)
	noteDurable(b, map[int]*shardJob{0: j})
	return okReply()
}

// multiKey runs one single-key sub-command per key (DEL, EXISTS, MGET,
// LIMIT.RESET) atomically across shards.
func (e *Engine) multiKey(c *Command, now int64, b *Batch) Reply {
	replies := make([]Reply, len(c.Sub))
	shards, jobs, idx := e.multiJobs(c.Sub, b, false)
	e.lockStep(shards, func(s int, t *shard.Table) {
		j := jobs[s]
		for _, i := range idx[s] {
			replies[i] = j.apply(t, &c.Sub[i], now)
		}
		if err := j.journal(c.Sub, replies, idx[s], now); err != nil {
			e.log.Error("journal append failed", "err", err)
		}
	}, nil, nil)
	noteDurable(b, jobs)
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
func (e *Engine) limitAll(c *Command, now int64, b *Batch) Reply {
	for i := range c.Sub {
		for k := 0; k < i; k++ {
			if string(c.Sub[k].Key) == string(c.Sub[i].Key) {
				return errReply(ErrSameKeyTwice)
			}
		}
	}
	replies := make([]Reply, len(c.Sub))
	shards, jobs, idx := e.multiJobs(c.Sub, b, true)
	firstTrip := -1
	e.lockStep(shards, func(s int, t *shard.Table) {
		for _, i := range idx[s] {
			replies[i] = jobs[s].apply(t, &c.Sub[i], now)
		}
	}, func() {
		for i, r := range replies {
			if r.Kind == ReplyError || r.Dec.Limited {
				firstTrip = i
				break
			}
		}
	}, func(s int, t *shard.Table) {
		if firstTrip >= 0 {
			return
		}
		j := jobs[s]
		j.dryRun, j.committing = false, true
		for _, i := range idx[s] {
			replies[i] = j.apply(t, &c.Sub[i], now)
		}
		// Each shard journals its own part as plain decisions: they were
		// allowed against this state, so replay allows them again.
		if err := j.journal(c.Sub, replies, idx[s], now); err != nil {
			e.log.Error("journal append failed", "err", err)
		}
		e.stats[s].allowed.Add(j.allowed)
	})
	noteDurable(b, jobs)
	if firstTrip >= 0 {
		if replies[firstTrip].Kind == ReplyError {
			return replies[firstTrip]
		}
		e.stats[e.shardOf(c.Sub[firstTrip].hash)].limited.Add(1)
	}
	limited := int64(0)
	if firstTrip >= 0 {
		limited = 1
	}
	return Reply{Kind: ReplyArray, Items: []Reply{
		intReply(limited), intReply(int64(firstTrip)), {Kind: ReplyArray, Items: replies},
	}}
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
