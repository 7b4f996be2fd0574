package engine

import (
	"encoding/binary"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/sluicehq/sluice/shard"
)

// Transactions. The server queues a connection's commands between MULTI
// and EXEC and sends them as one OpExec, whose Sub holds first the
// watched keys' checks (N[0] of them) and then the queued commands. EXEC
// holds every shard they touch, in ascending order as LIMIT.ALL does, so
// the transaction is atomic across shards; a command's runtime error is
// its own reply and does not undo the others, as in Redis. What the
// transaction changed is journaled as one record.
//
// WATCH: each shard keeps the keys connections watch, with a version that
// every change to the key bumps. WATCH returns the version, whether the
// key was live, and a fingerprint of its record; EXEC aborts (nil reply)
// when a watched key's version moved or a key live at WATCH has expired
// since. A cluster has no shared registry across nodes, so there the check
// is the fingerprint alone, which every node computes alike from the same
// state; it misses only a key changed and changed back to identical bytes.
const (
	OpExec    Op = 140 // EXEC: N[0] = watch checks leading Sub; Sub = checks, then the queued commands
	OpWatch   Op = 141 // internal: register a WATCH; replies [version, live, fingerprint]
	OpUnwatch Op = 142 // internal: drop a WATCH registration
	// OpWatchCheck is a watched key's check inside an EXEC: N[0] version,
	// N[1] 1 if the key was live at WATCH, N[2] its fingerprint, N[3] 1
	// to check the version registry (standalone) rather than the
	// fingerprint (cluster).
	OpWatchCheck Op = 143
)

func txOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpExec:       {Name: "exec", Writes: true, Creates: true, Keys: KeysHeld, Internal: true, applyHeld: (*heldRun).exec},
		OpWatch:      {Name: "watch", Keys: KeysOne, Internal: true, apply: (*shardJob).watch},
		OpUnwatch:    {Name: "unwatch", Keys: KeysOne, Internal: true, apply: (*shardJob).unwatch},
		OpWatchCheck: {Name: "watch-check", Keys: KeysOne, Internal: true},
	}
}

// watchers is one shard's WATCH registry. Only the shard's owner, or a
// coordinator holding the shard, touches it.
type watchers map[string]watchEntry

type watchEntry struct {
	refs    int
	version int64
}

// registry is shard s's WATCH registry, created on first use.
func (e *Engine) registry(s int) watchers {
	e.watchInit.Do(func() { e.watches = make([]watchers, len(e.shards)) })
	if e.watches[s] == nil {
		e.watches[s] = watchers{}
	}
	return e.watches[s]
}

// touched bumps the version of key on shard s if someone watches it.
// Called on the shard's owner (or holder) after every change.
func (e *Engine) touched(s int, key []byte) {
	if e.watches == nil {
		return
	}
	w := e.watches[s]
	if len(w) == 0 {
		return
	}
	if we, ok := w[string(key)]; ok {
		we.version++
		w[string(key)] = we
	}
}

// touchedAll bumps every watched key of shard s that is live in t (a
// FLUSHALL about to empty it), as Redis touches the watched keys that
// exist in a flushed database.
func (e *Engine) touchedAll(s int, t *shard.Table, now int64) {
	if e.watches == nil || len(e.watches[s]) == 0 {
		return
	}
	for k, we := range e.watches[s] {
		key := []byte(k)
		if _, ok := t.Get(key, shard.Hash(key), now); ok {
			we.version++
			e.watches[s][k] = we
		}
	}
}

func (j *shardJob) watch(t *shard.Table, c *Command, now int64) Reply {
	w := j.e.registry(j.shard)
	we := w[string(c.Key)]
	we.refs++
	w[string(c.Key)] = we
	live := int64(0)
	if _, ok := t.Get(c.Key, c.hash, now); ok {
		live = 1
	}
	return arrayReply([]Reply{intReply(we.version), intReply(live), intReply(fingerprint(t, c, now))})
}

func (j *shardJob) unwatch(_ *shard.Table, c *Command, _ int64) Reply {
	j.e.release(j.shard, c.Key)
	return okReply()
}

// release drops one registration of key on shard s.
func (e *Engine) release(s int, key []byte) {
	if e.watches == nil || e.watches[s] == nil {
		return
	}
	w := e.watches[s]
	we, ok := w[string(key)]
	if !ok {
		return
	}
	if we.refs--; we.refs <= 0 {
		delete(w, string(key))
		return
	}
	w[string(key)] = we
}

// fingerprint hashes a key's live record (kind, expiry, payload); 0 when
// it has none. A list is hashed by its count and elements, whatever its
// layout (list_big.go): a write that gives up a list's index changes
// nothing a client can see.
func fingerprint(t *shard.Table, c *Command, now int64) int64 {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return 0
	}
	var head [13]byte
	head[0] = byte(e.Kind)
	binary.LittleEndian.PutUint64(head[1:], uint64(t.ExpireAt(e)))
	d := xxhash.New()
	if e.Kind == shard.KindList {
		n, elems := listElems(e.Payload)
		binary.LittleEndian.PutUint32(head[9:], uint32(n))
		d.Write(head[:])
		d.Write(elems)
	} else {
		d.Write(head[:9])
		d.Write(e.Payload)
	}
	return int64(d.Sum64() | 1)
}

// exec runs a transaction on its held shards.
func (x *heldRun) exec(c *Command) Reply {
	checks := int(c.N[0])
	if checks < 0 || checks > len(c.Sub) {
		return errReply(errBadRecord)
	}
	intact := true
	for i := range checks {
		w := &c.Sub[i]
		t, j := x.on(w)
		_, live := t.Get(w.Key, w.hash, x.now)
		switch {
		case w.N[3] == 1:
			reg := x.e.registry(j.shard)[string(w.Key)]
			if reg.version != w.N[0] || (w.N[1] == 1 && !live) {
				intact = false
			}
			x.e.release(j.shard, w.Key)
		case fingerprint(t, w, x.now) != w.N[2]:
			intact = false
		}
	}
	if !intact {
		return Reply{Kind: ReplyNilArray}
	}
	replies := make([]Reply, len(c.Sub)-checks)
	for i := range replies {
		sub := &c.Sub[checks+i]
		if sub.Op.spec().Keys == KeysAll {
			replies[i] = x.keySpace(sub)
			continue
		}
		replies[i] = x.apply(sub)
	}
	return arrayReply(replies)
}

// keySpace runs KEYS, SCAN or FLUSHALL inside a transaction, on the
// tables already held (all of them).
func (x *heldRun) keySpace(c *Command) Reply {
	switch c.Op {
	case OpFlushAll:
		for s, t := range x.tables {
			x.e.touchedAll(s, t, x.now)
			t.Clear()
		}
		x.record(AllShards, *c)
		return okReply()
	case OpKeys:
		var done sync.WaitGroup
		var items []Reply
		for _, s := range x.e.allShards() {
			done.Add(1)
			task := keysTask{pattern: string(c.Pattern), now: x.now, done: &done}
			task.Run(x.tables[s])
			for _, k := range task.out {
				items = append(items, bulkReply(k))
			}
		}
		return arrayReply(items)
	case OpScan:
		return x.e.scanWith(c, x.now, func(s int, task *scanTask) { task.Run(x.tables[s]) })
	}
	return errReply(errUnknownOp)
}

// needsBigOps reports whether a held run of these commands empties the
// key space (FLUSHALL inside EXEC), which must not interleave with a
// snapshot's shard copies, or may (an EXEC containing a script: it holds
// every shard, and cannot start over halfway to take bigOps).
func needsBigOps(cmds []Command) bool {
	for i := range cmds {
		if bigOp(&cmds[i]) {
			return true
		}
	}
	return false
}

func bigOp(c *Command) bool {
	return c.Op == OpFlushAll || (c.Op == OpExec && (needsBigOps(c.Sub) || hasScript(c.Sub)))
}
