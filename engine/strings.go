package engine

import (
	"strconv"

	"github.com/sluicehq/sluice/shard"
)

// Strings: GET, SET, INCRBY and their variants, with Redis's semantics.

func (j *shardJob) get(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	return bulkReply(j.copyOut(e.Payload))
}

func (j *shardJob) set(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if (c.Flags&FlagNX != 0 && ok) || (c.Flags&FlagXX != 0 && !ok) {
		if c.Flags&FlagGet != 0 {
			return j.oldValue(e, ok)
		}
		return nilReply()
	}
	old := nilReply()
	if c.Flags&FlagGet != 0 {
		if old = j.oldValue(e, ok); old.Kind == ReplyError {
			return old
		}
	}
	exp := int64(0)
	switch {
	case c.Flags&FlagKeepTTL != 0 && ok:
		exp = t.ExpireAt(e)
	case c.Flags&FlagRelative != 0:
		exp = now + c.N[0]
	case c.N[0] != 0:
		exp = c.N[0]
	}
	if exp != 0 && exp <= now {
		// Redis: SET with an expiry already past deletes the key.
		if ok {
			t.Delete(e)
		}
		if c.Flags&FlagGet != 0 {
			return old
		}
		return okReply()
	}
	var err error
	if ok && e.Kind == shard.KindString {
		e, err = t.Resize(e, len(c.Value))
		if err == nil {
			t.SetExpireAt(e, exp)
		}
	} else if ok {
		e, err = t.Insert(c.Key, c.hash, shard.KindString, exp, len(c.Value))
	} else {
		e, err = j.create(t, c, shard.KindString, exp, len(c.Value))
	}
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, c.Value)
	if c.Flags&FlagGet != 0 {
		return old
	}
	return okReply()
}

func (j *shardJob) oldValue(e shard.Entry, ok bool) Reply {
	if !ok {
		return nilReply()
	}
	if e.Kind != shard.KindString {
		return errReply(ErrWrongType)
	}
	return bulkReply(j.copyOut(e.Payload))
}

func (j *shardJob) incrBy(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	var cur int64
	if ok {
		if cur, err = ParseInt64(e.Payload); err != nil {
			return errReply(ErrNotInteger)
		}
	}
	d := c.N[0]
	if (d > 0 && cur > 1<<63-1-d) || (d < 0 && cur < -1<<63-d) {
		return errReply(ErrOverflow)
	}
	cur += d
	var digits [20]byte
	v := strconv.AppendInt(digits[:0], cur, 10)
	if ok {
		e, err = t.Resize(e, len(v))
	} else {
		e, err = j.create(t, c, shard.KindString, 0, len(v))
	}
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, v)
	return intReply(cur)
}

// stringOps are the string ops beyond GET, SET and INCRBY (to come).
func stringOps() map[Op]OpSpec { return nil }
