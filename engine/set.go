package engine

import (
	"bytes"

	"github.com/sluicehq/sluice/shard"
)

// Sets: SADD and friends, with Redis 7's semantics. A set is the inline
// collection payload of collection.go, its members in insertion order.
// Redis lists a set in its intset or hash table order instead, which no
// client may rely on (SMEMBERS is nondeterministic_output_order).

// Set op numbers: 90-99, fixed forever.
const (
	OpSAdd       Op = 90 // SADD key member [member ...]
	OpSRem       Op = 91 // SREM key member [member ...]
	OpSCard      Op = 92 // SCARD key
	OpSIsMember  Op = 93 // SISMEMBER key member
	OpSMIsMember Op = 94 // SMISMEMBER key member [member ...]
	OpSMembers   Op = 95 // SMEMBERS key
	OpSScan      Op = 96 // SSCAN key cursor [MATCH pattern] [COUNT count]
)

func setOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpSAdd:       {Name: "sadd", Writes: true, Creates: true, Keys: KeysOne, changed: hsChangedCount, apply: (*shardJob).sadd},
		OpSRem:       {Name: "srem", Writes: true, Keys: KeysOne, changed: hsChangedCount, apply: (*shardJob).srem},
		OpSCard:      {Name: "scard", Keys: KeysOne, apply: (*shardJob).scard},
		OpSIsMember:  {Name: "sismember", Keys: KeysOne, apply: (*shardJob).sismember},
		OpSMIsMember: {Name: "smismember", Keys: KeysOne, apply: (*shardJob).smismember},
		OpSMembers:   {Name: "smembers", Keys: KeysOne, apply: (*shardJob).smembers},
		OpSScan:      {Name: "sscan", Keys: KeysOne, apply: (*shardJob).sscan},
	}
}

// setHas reports whether member is in the set body b (a payload after its
// header, or members encoded one after another).
func setHas(b, member []byte) bool {
	for off := 0; off < len(b); {
		m, next := hsStrAt(b, off)
		if bytes.Equal(m, member) {
			return true
		}
		off = next
	}
	return false
}

func (j *shardJob) sadd(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(hsArityError("sadd"))
	}
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	// Only the new members are collected, then appended: adding members
	// already there copies nothing.
	var old []byte
	if ok {
		old = e.Payload[collHeader:]
	}
	j.beginCollection()
	added := 0
	for _, m := range c.Args {
		if setHas(old, m) || setHas(j.scratch[collHeader:], m) {
			continue
		}
		j.scratch = appendStr(j.scratch, m)
		added++
	}
	if added == 0 {
		return intReply(0)
	}
	if err := j.hsAppendElements(t, c, e, ok, shard.KindSet, added); err != nil {
		return errReply(err)
	}
	return intReply(int64(added))
}

func (j *shardJob) srem(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(hsArityError("srem"))
	}
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	body := e.Payload[collHeader:]
	deleted := 0
	for off := 0; off < len(body); {
		m, next := hsStrAt(body, off)
		if hsIsArg(c.Args, m) {
			if deleted == 0 {
				j.beginCollection()
				j.scratch = append(j.scratch, body[:off]...)
			}
			deleted++
		} else if deleted > 0 {
			j.scratch = append(j.scratch, body[off:next]...)
		}
		off = next
	}
	if deleted == 0 {
		return intReply(0)
	}
	if err := j.storeCollection(t, c, e, ok, shard.KindSet, collCount(e.Payload)-deleted); err != nil {
		return errReply(err)
	}
	return intReply(int64(deleted))
}

func (j *shardJob) scard(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	return intReply(int64(collCount(e.Payload)))
}

func (j *shardJob) sismember(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 1 {
		return errReply(hsArityError("sismember"))
	}
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	if ok && setHas(e.Payload[collHeader:], c.Args[0]) {
		return intReply(1)
	}
	return intReply(0)
}

func (j *shardJob) smismember(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(hsArityError("smismember"))
	}
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	items := make([]Reply, len(c.Args))
	for i, m := range c.Args {
		items[i] = intReply(0)
		if ok && setHas(e.Payload[collHeader:], m) {
			items[i] = intReply(1)
		}
	}
	return arrayReply(items)
}

func (j *shardJob) smembers(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := collection(t, c, now, shard.KindSet)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return Reply{Kind: ReplySet, Items: []Reply{}}
	}
	items := make([]Reply, 0, collCount(e.Payload))
	for it := iterStrings(e.Payload); it.more(); {
		items = append(items, j.bulk(it.next()))
	}
	return Reply{Kind: ReplySet, Items: items}
}

func (j *shardJob) sscan(t *shard.Table, c *Command, now int64) Reply {
	return j.hsScan(t, c, now, shard.KindSet)
}
