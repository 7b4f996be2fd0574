package engine

import (
	"slices"
	"sync"

	"github.com/sluicehq/sluice/engine/glob"

	"github.com/sluicehq/sluice/shard"
)

// Keys: DEL, EXISTS, TYPE, TTL, EXPIRE, PERSIST on one key, and KEYS, SCAN
// and FLUSHALL over the whole key space.

func (j *shardJob) del(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	// LIMIT.RESET forgets limiter state only.
	if ok && (c.Flags&FlagReset == 0 || isLimiter(e.Kind)) {
		t.Delete(e)
		return intReply(1)
	}
	return intReply(0)
}

func (j *shardJob) exists(t *shard.Table, c *Command, now int64) Reply {
	if _, ok := t.Get(c.Key, c.hash, now); ok {
		return intReply(1)
	}
	return intReply(0)
}

func (j *shardJob) typeOf(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return Reply{Kind: ReplyStatus, Str: "none"}
	}
	return Reply{Kind: ReplyStatus, Str: KindName(e.Kind)}
}

func (j *shardJob) persist(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok || t.ExpireAt(e) == 0 {
		return intReply(0)
	}
	if isLimiter(e.Kind) {
		return errReply(ErrLimiterExpiry)
	}
	t.SetExpireAt(e, 0)
	return intReply(1)
}

// OpTTL's modes, in N[0].
const (
	TTLSeconds     int64 = 0 // TTL
	TTLMillis      int64 = 1 // PTTL
	TTLUnixSeconds int64 = 2 // EXPIRETIME
	TTLUnixMillis  int64 = 3 // PEXPIRETIME
)

// ttl is a limiter's remaining time to full (its reset_after), or a
// string's time to live; or, as EXPIRETIME, the expiry itself.
func (j *shardJob) ttl(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return intReply(-2)
	}
	exp := t.ExpireAt(e)
	if exp == 0 {
		return intReply(-1)
	}
	switch c.N[0] {
	case TTLUnixMillis:
		return intReply(MillisRoundedUp(exp))
	case TTLUnixSeconds:
		return intReply((MillisRoundedUp(exp) + 500) / 1000)
	}
	left := exp - now
	millis := c.N[0] == TTLMillis
	if isLimiter(e.Kind) {
		// A limiter's TTL is its reset_after, rounded as decisions round it.
		if millis {
			return intReply(MillisRoundedUp(left))
		}
		return intReply(SecondsRoundedUp(left))
	}
	ms := MillisRoundedUp(left)
	if millis {
		return intReply(ms)
	}
	return intReply((ms + 500) / 1000)
}

// expiryAfter is the expiry d ns after now. Redis counts a relative expiry
// from its clock's whole millisecond, so PEXPIRETIME after PEXPIRE k 1000
// is that millisecond + 1000 and PTTL reads 1000 within it; counting from
// the nanosecond would report every such expiry 1 ms later than Redis.
func expiryAfter(now, d int64) int64 {
	return now - now%1e6 + d
}

func (j *shardJob) expire(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return intReply(0)
	}
	if isLimiter(e.Kind) {
		return errReply(ErrLimiterExpiry)
	}
	at := c.N[0]
	if c.Flags&FlagRelative != 0 {
		at = expiryAfter(now, c.N[0])
	}
	cur := t.ExpireAt(e)
	switch {
	case c.Flags&FlagNX != 0 && cur != 0,
		c.Flags&FlagXX != 0 && cur == 0,
		c.Flags&FlagGT != 0 && (cur == 0 || at <= cur),
		c.Flags&FlagLT != 0 && cur != 0 && at >= cur:
		return intReply(0)
	}
	if at <= now {
		t.Delete(e)
		return intReply(1)
	}
	t.SetExpireAt(e, at)
	return intReply(1)
}

func (e *Engine) flushAll(c *Command, now int64, b *Batch) Reply {
	e.bigOps.Lock()
	defer e.bigOps.Unlock()
	h := e.hold(e.allShards())
	defer h.done()
	for s, t := range h.tables {
		e.touchedAll(s, t, now)
		t.Clear()
	}
	// Journaled while every shard is held, as one record for all.
	j := &shardJob{e: e, b: b, shard: AllShards}
	if err := j.journal([]Command{*c}, []Reply{okReply()}, []int32{0}, now); err != nil {
		e.log.Error("journal append failed", "err", err)
	}
	if b != nil {
		b.durable = max(b.durable, j.durableSeq)
		b.journalFailed = b.journalFailed || j.journalFailed
	}
	return okReply()
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
		if k.pattern == "*" || glob.Match(k.pattern, string(en.Key)) {
			k.out = append(k.out, slices.Clone(en.Key))
		}
		return true
	})
	k.done.Done()
}

func (e *Engine) keys(c *Command, now int64, _ *Batch) Reply {
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
		if pattern != "" && pattern != "*" && !glob.Match(pattern, string(key)) {
			return
		}
		s.out = append(s.out, slices.Clone(key))
	})
	close(s.done)
}

// scan serves SCAN. The cursor is shard<<32 | position in that shard's
// hash space; 0 starts and ends the iteration.
func (e *Engine) scan(c *Command, now int64, _ *Batch) Reply {
	return e.scanWith(c, now, func(s int, task *scanTask) {
		e.shards[s].Submit(task)
		<-task.done
	})
}

// scanWith serves SCAN, running the shard's part with run (on the shard's
// owner, or on a table already held).
func (e *Engine) scanWith(c *Command, now int64, run func(s int, task *scanTask)) Reply {
	cursor := uint64(c.N[0])
	s := int(cursor >> 32)
	if s >= len(e.shards) {
		return Reply{Kind: ReplyArray, Items: []Reply{strReply("0"), {Kind: ReplyArray}}}
	}
	task := &scanTask{c: c, cursor: cursor & (1<<32 - 1), now: now, done: make(chan struct{})}
	run(s, task)
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
