package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/sluicehq/sluice/shard"
)

// Hashes: HSET and friends, with Redis 7's semantics. A hash is the inline
// collection payload of collection.go: field, value, field, value... in
// insertion order, a field updated in place keeping its position, which is
// the order of Redis's listpack encoding, so small hashes list their
// fields exactly as Redis does.

// Hash op numbers: 50-69, fixed forever.
const (
	OpHSet         Op = 50 // HSET key field value [field value ...]
	OpHSetNX       Op = 51 // HSETNX key field value
	OpHMSet        Op = 52 // HMSET key field value [field value ...]
	OpHGet         Op = 53 // HGET key field
	OpHMGet        Op = 54 // HMGET key field [field ...]
	OpHGetAll      Op = 55 // HGETALL key
	OpHDel         Op = 56 // HDEL key field [field ...]
	OpHExists      Op = 57 // HEXISTS key field
	OpHLen         Op = 58 // HLEN key
	OpHKeys        Op = 59 // HKEYS key
	OpHVals        Op = 60 // HVALS key
	OpHStrLen      Op = 61 // HSTRLEN key field
	OpHIncrBy      Op = 62 // HINCRBY key field increment
	OpHIncrByFloat Op = 63 // HINCRBYFLOAT key field increment
	OpHScan        Op = 64 // HSCAN key cursor [MATCH pattern] [COUNT count]
)

// Errors of the hash commands, in Redis's words.
var (
	errHashNotInteger  = errors.New("hash value is not an integer")
	errHashNotFloat    = errors.New("hash value is not a float")
	errHSNaNOrInfinity = errors.New("value is NaN or Infinity")
	errHSInvalidCursor = errors.New("invalid cursor")
)

func hashOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpHSet:         {Name: "hset", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).hset},
		OpHSetNX:       {Name: "hsetnx", Writes: true, Creates: true, Keys: KeysOne, changed: hsChangedCount, apply: (*shardJob).hsetnx},
		OpHMSet:        {Name: "hmset", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).hmset},
		OpHGet:         {Name: "hget", Keys: KeysOne, apply: (*shardJob).hget},
		OpHMGet:        {Name: "hmget", Keys: KeysOne, apply: (*shardJob).hmget},
		OpHGetAll:      {Name: "hgetall", Keys: KeysOne, apply: (*shardJob).hgetall},
		OpHDel:         {Name: "hdel", Writes: true, Keys: KeysOne, changed: hsChangedCount, apply: (*shardJob).hdel},
		OpHExists:      {Name: "hexists", Keys: KeysOne, apply: (*shardJob).hexists},
		OpHLen:         {Name: "hlen", Keys: KeysOne, apply: (*shardJob).hlen},
		OpHKeys:        {Name: "hkeys", Keys: KeysOne, apply: (*shardJob).hkeys},
		OpHVals:        {Name: "hvals", Keys: KeysOne, apply: (*shardJob).hvals},
		OpHStrLen:      {Name: "hstrlen", Keys: KeysOne, apply: (*shardJob).hstrlen},
		OpHIncrBy:      {Name: "hincrby", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).hincrBy},
		OpHIncrByFloat: {Name: "hincrbyfloat", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).hincrByFloat},
		OpHScan:        {Name: "hscan", Keys: KeysOne, apply: (*shardJob).hscan},
	}
}

// hsChangedCount: a write whose integer reply counts what it changed (HDEL,
// SREM, SADD, HSETNX) changed state only when that count is positive.
func hsChangedCount(_ *Command, r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

// hsArityError is Redis's reply to an argument count its arity cannot
// express (HSET with a field and no value).
func hsArityError(name string) error {
	return errors.New("wrong number of arguments for '" + name + "' command")
}

// hsStrAt decodes the string encoded at b[off:] and returns it (aliasing b)
// and the offset after it.
func hsStrAt(b []byte, off int) ([]byte, int) {
	n, w := uvarintFast(b[off:])
	off += w
	return b[off : off+n : off+n], off + n
}

// hashFind finds field in a hash body (a payload after its header): the
// bounds of its value's encoding, or ok false.
func hashFind(body, field []byte) (vstart, vend int, ok bool) {
	for off := 0; off < len(body); {
		f, next := hsStrAt(body, off)
		_, end := hsStrAt(body, next)
		if bytes.Equal(f, field) {
			return next, end, true
		}
		off = end
	}
	return 0, 0, false
}

// hashGet is field's value in a hash payload.
func hashGet(payload, field []byte) ([]byte, bool) {
	body := payload[collHeader:]
	vs, _, ok := hashFind(body, field)
	if !ok {
		return nil, false
	}
	v, _ := hsStrAt(body, vs)
	return v, true
}

func hsUvarintLen(n int) int {
	w := 1
	for n >= 0x80 {
		n >>= 7
		w++
	}
	return w
}

// hsReplaceStr replaces the encoded string at buf[start:end] with s,
// shifting what follows, and returns the buffer.
func hsReplaceStr(buf []byte, start, end int, s []byte) []byte {
	newLen := hsUvarintLen(len(s)) + len(s)
	old := end - start
	switch {
	case newLen > old:
		grow := newLen - old
		buf = append(buf, make([]byte, grow)...)
		copy(buf[end+grow:], buf[end:len(buf)-grow])
	case newLen < old:
		copy(buf[start+newLen:], buf[end:])
		buf = buf[:len(buf)-(old-newLen)]
	}
	w := binary.PutUvarint(buf[start:], uint64(len(s)))
	copy(buf[start+w:], s)
	return buf
}

// hashPut sets field to value in the hash being built in j.scratch: in
// place when the field is there, appended otherwise. It reports whether
// the field is new.
func (j *shardJob) hashPut(field, value []byte) bool {
	if vs, ve, ok := hashFind(j.scratch[collHeader:], field); ok {
		j.scratch = hsReplaceStr(j.scratch, collHeader+vs, collHeader+ve, value)
		return false
	}
	j.scratch = appendStr(appendStr(j.scratch, field), value)
	return true
}

// hsAppendElements adds the n elements encoded in j.scratch after its
// header to the end of collection e, or makes them a new collection when
// there is none (ok false), refusing growth past maxmemory.
func (j *shardJob) hsAppendElements(t *shard.Table, c *Command, e shard.Entry, ok bool, kind shard.Kind, n int) error {
	if !ok {
		return j.storeCollection(t, c, e, ok, kind, n)
	}
	if err := j.growable(); err != nil {
		return err
	}
	extra := j.scratch[collHeader:]
	old := len(e.Payload)
	count := collCount(e.Payload) + n
	e, err := t.Resize(e, old+len(extra))
	if err != nil {
		return err
	}
	copy(e.Payload[old:], extra)
	binary.LittleEndian.PutUint32(e.Payload, uint32(count))
	return nil
}

// hashSetOne sets one field of the hash e (ok false: a new hash) and
// reports whether the field is new. A value of the same encoded length is
// written in place, a new field appended; anything else rewrites the hash.
func (j *shardJob) hashSetOne(t *shard.Table, c *Command, e shard.Entry, ok bool, field, value []byte) (bool, error) {
	if ok {
		body := e.Payload[collHeader:]
		vs, ve, found := hashFind(body, field)
		switch {
		case found && ve-vs == hsUvarintLen(len(value))+len(value):
			w := binary.PutUvarint(body[vs:], uint64(len(value)))
			copy(body[vs+w:], value)
			return false, nil
		case found:
			j.beginCollection()
			j.scratch = append(j.scratch, body[:vs]...)
			j.scratch = appendStr(j.scratch, value)
			j.scratch = append(j.scratch, body[ve:]...)
			return false, j.storeCollection(t, c, e, ok, shard.KindHash, collCount(e.Payload))
		}
	}
	j.beginCollection()
	j.scratch = appendStr(appendStr(j.scratch, field), value)
	return true, j.hsAppendElements(t, c, e, ok, shard.KindHash, 1)
}

// hashSetPairs is HSET and HMSET: it sets every field/value pair of
// c.Args and returns how many fields are new.
func (j *shardJob) hashSetPairs(t *shard.Table, c *Command, now int64, name string) (int64, error) {
	if len(c.Args) == 0 || len(c.Args)%2 != 0 {
		return 0, hsArityError(name)
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return 0, err
	}
	if len(c.Args) == 2 {
		created, err := j.hashSetOne(t, c, e, ok, c.Args[0], c.Args[1])
		if created {
			return 1, err
		}
		return 0, err
	}
	j.beginCollection()
	count := 0
	if ok {
		j.scratch = append(j.scratch, e.Payload[collHeader:]...)
		count = collCount(e.Payload)
	}
	created := 0
	for i := 0; i < len(c.Args); i += 2 {
		if j.hashPut(c.Args[i], c.Args[i+1]) {
			created++
		}
	}
	if err := j.storeCollection(t, c, e, ok, shard.KindHash, count+created); err != nil {
		return 0, err
	}
	return int64(created), nil
}

func (j *shardJob) hset(t *shard.Table, c *Command, now int64) Reply {
	n, err := j.hashSetPairs(t, c, now, "hset")
	if err != nil {
		return errReply(err)
	}
	return intReply(n)
}

func (j *shardJob) hmset(t *shard.Table, c *Command, now int64) Reply {
	if _, err := j.hashSetPairs(t, c, now, "hmset"); err != nil {
		return errReply(err)
	}
	return okReply()
}

func (j *shardJob) hsetnx(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 2 {
		return errReply(hsArityError("hsetnx"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if ok {
		if _, found := hashGet(e.Payload, c.Args[0]); found {
			return intReply(0)
		}
	}
	j.beginCollection()
	j.scratch = appendStr(appendStr(j.scratch, c.Args[0]), c.Args[1])
	if err := j.hsAppendElements(t, c, e, ok, shard.KindHash, 1); err != nil {
		return errReply(err)
	}
	return intReply(1)
}

func (j *shardJob) hget(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 1 {
		return errReply(hsArityError("hget"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	if v, found := hashGet(e.Payload, c.Args[0]); found {
		return j.bulk(v)
	}
	return nilReply()
}

func (j *shardJob) hmget(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(hsArityError("hmget"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	items := make([]Reply, len(c.Args))
	for i, f := range c.Args {
		if ok {
			if v, found := hashGet(e.Payload, f); found {
				items[i] = j.bulk(v)
				continue
			}
		}
		items[i] = nilReply()
	}
	return arrayReply(items)
}

// hashList serves HGETALL, HKEYS and HVALS: the fields, the values or
// both, in the hash's order.
func (j *shardJob) hashList(t *shard.Table, c *Command, now int64, keys, vals bool) Reply {
	kind := ReplyArray
	if keys && vals {
		kind = ReplyMap
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return Reply{Kind: kind, Items: []Reply{}}
	}
	n := collCount(e.Payload)
	if keys && vals {
		n *= 2
	}
	items := make([]Reply, 0, n)
	for it := iterStrings(e.Payload); it.more(); {
		f, v := it.next(), it.next()
		if keys {
			items = append(items, j.bulk(f))
		}
		if vals {
			items = append(items, j.bulk(v))
		}
	}
	return Reply{Kind: kind, Items: items}
}

func (j *shardJob) hgetall(t *shard.Table, c *Command, now int64) Reply {
	return j.hashList(t, c, now, true, true)
}

func (j *shardJob) hkeys(t *shard.Table, c *Command, now int64) Reply {
	return j.hashList(t, c, now, true, false)
}

func (j *shardJob) hvals(t *shard.Table, c *Command, now int64) Reply {
	return j.hashList(t, c, now, false, true)
}

// hsIsArg reports whether s is one of args.
func hsIsArg(args [][]byte, s []byte) bool {
	for _, a := range args {
		if bytes.Equal(a, s) {
			return true
		}
	}
	return false
}

func (j *shardJob) hdel(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(hsArityError("hdel"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	body := e.Payload[collHeader:]
	deleted := 0
	for off := 0; off < len(body); {
		f, next := hsStrAt(body, off)
		_, end := hsStrAt(body, next)
		if hsIsArg(c.Args, f) {
			if deleted == 0 {
				j.beginCollection()
				j.scratch = append(j.scratch, body[:off]...)
			}
			deleted++
		} else if deleted > 0 {
			j.scratch = append(j.scratch, body[off:end]...)
		}
		off = end
	}
	if deleted == 0 {
		return intReply(0)
	}
	if err := j.storeCollection(t, c, e, ok, shard.KindHash, collCount(e.Payload)-deleted); err != nil {
		return errReply(err)
	}
	return intReply(int64(deleted))
}

func (j *shardJob) hexists(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 1 {
		return errReply(hsArityError("hexists"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	if _, found := hashGet(e.Payload, c.Args[0]); found {
		return intReply(1)
	}
	return intReply(0)
}

func (j *shardJob) hlen(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	return intReply(int64(collCount(e.Payload)))
}

func (j *shardJob) hstrlen(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 1 {
		return errReply(hsArityError("hstrlen"))
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	v, _ := hashGet(e.Payload, c.Args[0])
	return intReply(int64(len(v)))
}

func (j *shardJob) hincrBy(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 2 {
		return errReply(hsArityError("hincrby"))
	}
	// Redis parses the increment before it looks the key up.
	incr, err := ParseInt64(c.Args[1])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	var cur int64
	if ok {
		if v, found := hashGet(e.Payload, c.Args[0]); found {
			if cur, err = ParseInt64(v); err != nil {
				return errReply(errHashNotInteger)
			}
		}
	}
	if (incr < 0 && cur < 0 && incr < -1<<63-cur) || (incr > 0 && cur > 0 && incr > 1<<63-1-cur) {
		return errReply(ErrOverflow)
	}
	cur += incr
	var digits [20]byte
	if _, err := j.hashSetOne(t, c, e, ok, c.Args[0], strconv.AppendInt(digits[:0], cur, 10)); err != nil {
		return errReply(err)
	}
	return intReply(cur)
}

// hsMaxLongDoubleChars is Redis's MAX_LONG_DOUBLE_CHARS: string2ld refuses
// anything this long or longer.
const hsMaxLongDoubleChars = 5 * 1024

func (j *shardJob) hincrByFloat(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 2 {
		return errReply(hsArityError("hincrbyfloat"))
	}
	incr := c.Args[1]
	// The increment is checked before the key is looked up.
	d, valid := parseLongDouble(incr)
	if !valid || len(incr) >= hsMaxLongDoubleChars {
		return errReply(ErrNotFloat)
	}
	if d.IsInf() {
		return errReply(errHSNaNOrInfinity)
	}
	e, ok, err := collection(t, c, now, shard.KindHash)
	if err != nil {
		return errReply(err)
	}
	var cur []byte
	if ok {
		if v, found := hashGet(e.Payload, c.Args[0]); found {
			if len(v) >= hsMaxLongDoubleChars {
				return errReply(errHashNotFloat)
			}
			cur = v
		}
	}
	v, err := incrLongDouble(cur, incr, errHashNotFloat)
	if err != nil {
		return errReply(err)
	}
	if _, err := j.hashSetOne(t, c, e, ok, c.Args[0], v); err != nil {
		return errReply(err)
	}
	return bulkReply(v)
}

func (j *shardJob) hscan(t *shard.Table, c *Command, now int64) Reply {
	return j.hsScan(t, c, now, shard.KindHash)
}
