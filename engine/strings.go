package engine

import (
	"errors"
	"slices"
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
		j.unchanged = true
		if c.Flags&FlagGet != 0 {
			return j.oldValue(e, ok)
		}
		if c.Flags&FlagIntReply != 0 {
			return intReply(0)
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
		exp = expiryAfter(now, c.N[0])
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
	if c.Flags&FlagIntReply != 0 {
		return intReply(1)
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

// More string and key ops. Their arguments beyond the key come in Args,
// parsed here in the order Redis checks them.
const (
	OpGetDel      Op = 22 // GETDEL
	OpGetEx       Op = 23 // GETEX: Args = options
	OpIncrByFloat Op = 24 // INCRBYFLOAT: Args[0] = increment
	OpStrLen      Op = 25 // STRLEN
	OpAppend      Op = 26 // APPEND: Value
	OpRestore     Op = 27 // internal: a record as RENAME moved it (Value = payload, N = kind, expiry)
	OpObject      Op = 28 // OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ: N[0] says which
	OpRename      Op = 29 // RENAME, RENAMENX (FlagNX): Sub = source, destination
	OpGetRange    Op = 36 // GETRANGE, SUBSTR: N[0] = start, N[1] = end
	OpSetRange    Op = 37 // SETRANGE: N[0] = offset, Value
	OpMSetNX      Op = 38 // MSETNX: Sub = the keys and their values, all set or none
)

// OBJECT subcommands, in OpObject's N[0].
const (
	ObjectEncoding int64 = iota
	ObjectRefCount
	ObjectIdleTime
	ObjectFreq
	ObjectMemoryUsage // MEMORY USAGE: the bytes the key takes
)

func stringOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpGetDel:      {Name: "getdel", Writes: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).getDel},
		OpGetEx:       {Name: "getex", Writes: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).getEx},
		OpIncrByFloat: {Name: "incrbyfloat", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).incrByFloat},
		OpStrLen:      {Name: "strlen", Keys: KeysOne, apply: (*shardJob).strLen},
		OpAppend:      {Name: "append", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).appendValue},
		OpRestore:     {Name: "restore-record", Writes: true, Keys: KeysOne, Internal: true, changed: succeeded, apply: (*shardJob).restoreRecord},
		OpObject:      {Name: "object", Keys: KeysOne, Internal: true, apply: (*shardJob).object},
		OpRename:      {Name: "rename", Writes: true, Keys: KeysHeld, changed: succeeded, applyHeld: (*heldRun).rename},
		OpGetRange:    {Name: "getrange", Keys: KeysOne, apply: (*shardJob).getRange},
		OpSetRange:    {Name: "setrange", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).setRange},
		// MSETNX journals the SETs it made (msetNX), not itself.
		OpMSetNX: {Name: "msetnx", Writes: true, Creates: true, Keys: KeysHeld, changed: func(*Command, *Reply) bool { return false }, applyHeld: (*heldRun).msetNX},
	}
}

func (j *shardJob) getDel(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		j.unchanged = true
		return nilReply()
	}
	r := j.bulk(e.Payload)
	t.Delete(e)
	return r
}

// getEx: GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST]. The options'
// syntax is checked first, then the key, then the expiry's value.
func (j *shardJob) getEx(t *shard.Table, c *Command, now int64) Reply {
	var expiry []byte
	var unit int64 = 1e9
	relative, persist := false, false
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		last := i == len(c.Args)-1
		switch {
		case !last && (eqFold(a, "ex") || eqFold(a, "px") || eqFold(a, "exat") || eqFold(a, "pxat")):
			if expiry != nil || persist {
				return errReply(ErrSyntax)
			}
			expiry = c.Args[i+1]
			relative = len(a) == 2
			if a[0] == 'p' || a[0] == 'P' {
				unit = 1e6
			}
			i++
		case eqFold(a, "persist"):
			if expiry != nil {
				return errReply(ErrSyntax)
			}
			persist = true
		default:
			return errReply(ErrSyntax)
		}
	}
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		j.unchanged = true
		return nilReply()
	}
	var at int64
	if expiry != nil {
		if at, err = expiryTime(expiry, unit, relative, now, "getex"); err != nil {
			return errReply(err)
		}
	}
	r := j.bulk(e.Payload)
	j.unchanged = expiry == nil && !persist
	switch {
	case expiry != nil && at <= now:
		t.Delete(e)
	case expiry != nil:
		t.SetExpireAt(e, at)
	case persist:
		t.SetExpireAt(e, 0)
	}
	return r
}

// expiryTime turns an expiry argument into an absolute time in ns, with
// Redis's checks: an integer, positive, and representable.
func expiryTime(b []byte, unit int64, relative bool, now int64, cmd string) (int64, error) {
	n, err := ParseInt64(b)
	if err != nil {
		return 0, ErrNotInteger
	}
	const maxNanos = 1<<63 - 1
	if n <= 0 || n > maxNanos/unit || (relative && n*unit > maxNanos-now) {
		return 0, errors.New("invalid expire time in '" + cmd + "' command")
	}
	if relative {
		return expiryAfter(now, n*unit), nil
	}
	return n * unit, nil
}

func eqFold(b []byte, word string) bool {
	if len(b) != len(word) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// incrByFloat: INCRBYFLOAT key increment, in long double as Redis
// computes it; the key keeps its expiry.
func (j *shardJob) incrByFloat(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	var cur []byte
	if ok {
		cur = e.Payload
	}
	v, err := incrLongDouble(cur, c.Args[0], ErrNotFloat)
	if err != nil {
		return errReply(err)
	}
	if ok {
		if len(v) > len(e.Payload) {
			err = j.growable()
		}
		if err == nil {
			e, err = t.Resize(e, len(v))
		}
	} else {
		e, err = j.create(t, c, shard.KindString, 0, len(v))
	}
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, v)
	return j.bulk(v)
}

func (j *shardJob) strLen(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	return intReply(int64(len(e.Payload)))
}

// appendValue: APPEND key value; a new key is created, an existing one
// keeps its expiry.
func (j *shardJob) appendValue(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		if e, err = j.create(t, c, shard.KindString, 0, len(c.Value)); err != nil {
			return errReply(err)
		}
		copy(e.Payload, c.Value)
		return intReply(int64(len(c.Value)))
	}
	if len(c.Value) == 0 {
		return intReply(int64(len(e.Payload)))
	}
	if err := j.growable(); err != nil {
		return errReply(err)
	}
	old := len(e.Payload)
	if e, err = t.Resize(e, old+len(c.Value)); err != nil {
		return errReply(err)
	}
	copy(e.Payload[old:], c.Value)
	return intReply(int64(len(e.Payload)))
}

// getRange: GETRANGE key start end, Redis 7.0's: negative indexes count
// from the end, both ends are clamped to the string, and a range that is
// empty (or both ends negative, the start after the end) is "".
func (j *shardJob) getRange(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return bulkReply([]byte{})
	}
	start, end, n := c.N[0], c.N[1], int64(len(e.Payload))
	if start < 0 && end < 0 && start > end {
		return bulkReply([]byte{})
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return bulkReply([]byte{})
	}
	return j.bulk(e.Payload[start : end+1])
}

// maxStringLength is Redis's proto-max-bulk-len default, which SETRANGE
// checks before anything is made; Sluice's records stop far sooner (at
// shard.ErrTooLarge), but an offset past this one gets Redis's error.
const maxStringLength = 512 << 20

var errStringTooLong = errors.New("string exceeds maximum allowed size (proto-max-bulk-len)")

// setRange: SETRANGE key offset value, overwriting from offset, the gap
// before it (past the old end) zeroes; an empty value changes nothing and
// replies the length. The offset was checked for being >= 0 by the parse.
func (j *shardJob) setRange(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := lookup(t, c, now, shard.KindString)
	if err != nil {
		return errReply(err)
	}
	offset, v := c.N[0], c.Value
	if len(v) == 0 {
		j.unchanged = true
		if !ok {
			return intReply(0)
		}
		return intReply(int64(len(e.Payload)))
	}
	if offset > maxStringLength-int64(len(v)) {
		return errReply(errStringTooLong)
	}
	size := int(offset) + len(v)
	if !ok {
		if e, err = j.create(t, c, shard.KindString, 0, size); err != nil {
			return errReply(err)
		}
		clear(e.Payload[:offset])
		copy(e.Payload[offset:], v)
		return intReply(int64(size))
	}
	old := len(e.Payload)
	if size > old {
		if err := j.growable(); err != nil {
			return errReply(err)
		}
		if e, err = t.Resize(e, size); err != nil {
			return errReply(err)
		}
		clear(e.Payload[old:max(old, int(offset))])
	}
	copy(e.Payload[offset:], v)
	return intReply(int64(len(e.Payload)))
}

// msetNX: MSETNX sets every key, or none when any of them exists; the
// SETs are its journal records. What could fail a SET (maxmemory, a record
// too large) is checked first, so that none fails part way.
func (x *heldRun) msetNX(c *Command) Reply {
	for i := range c.Sub {
		k := &c.Sub[i]
		t, _ := x.on(k)
		if _, exists := t.Get(k.Key, k.hash, x.now); exists {
			return intReply(0)
		}
		if !shard.Fits(len(k.Key), len(k.Value)) {
			return errReply(shard.ErrTooLarge)
		}
	}
	if err := x.createAllOrNone(c.Sub[0].hash); err != nil {
		return errReply(err)
	}
	defer x.setCommitting(false)
	for i := range c.Sub {
		k := &c.Sub[i]
		set := Command{Op: OpSet, Key: k.Key, Value: k.Value, hash: k.hash}
		x.run(&set)
	}
	return intReply(1)
}

// restoreRecord writes a record as RENAME moved it: replay of a rename
// across shards redoes each shard's half.
func (j *shardJob) restoreRecord(t *shard.Table, c *Command, now int64) Reply {
	kind, exp := shard.Kind(c.N[0]), c.N[1]
	if kind == shard.KindDead || kind > shard.KindLast {
		return errReply(errBadRecord)
	}
	if exp != 0 && exp <= now {
		if e, ok := t.Get(c.Key, c.hash, now); ok {
			t.Delete(e)
		}
		return okReply()
	}
	e, err := t.Insert(c.Key, c.hash, kind, exp, len(c.Value))
	if err != nil {
		return errReply(err)
	}
	copy(e.Payload, c.Value)
	return okReply()
}

// rename: RENAME and RENAMENX. The record moves whole (kind, payload,
// expiry); replay gets the two halves as a restore and a delete.
func (x *heldRun) rename(c *Command) Reply {
	src, dst := &c.Sub[0], &c.Sub[1]
	nx := c.Flags&FlagNX != 0
	ts, js := x.on(src)
	e, ok := ts.Get(src.Key, src.hash, x.now)
	if !ok {
		return errReply(ErrNoSuchKey)
	}
	done := okReply()
	if nx {
		done = intReply(1)
	}
	if string(src.Key) == string(dst.Key) {
		if nx {
			return intReply(0)
		}
		return done
	}
	td, jd := x.on(dst)
	if _, exists := td.Get(dst.Key, dst.hash, x.now); exists && nx {
		return intReply(0)
	}
	kind, exp := e.Kind, ts.ExpireAt(e)
	payload := slices.Clone(e.Payload)
	moved, err := td.Insert(dst.Key, dst.hash, kind, exp, len(payload))
	if err != nil {
		return errReply(err)
	}
	copy(moved.Payload, payload)
	// The insert may have moved index slots: find the source again.
	if e, ok = ts.Get(src.Key, src.hash, x.now); ok {
		ts.Delete(e)
	}
	x.record(jd.shard, Command{Op: OpRestore, Key: dst.Key, Value: payload, N: [4]int64{int64(kind), exp}})
	x.record(js.shard, Command{Op: OpDel, Key: src.Key})
	x.e.touched(js.shard, src.Key)
	x.e.touched(jd.shard, dst.Key)
	return done
}

// object: OBJECT ENCODING and friends. Encodings are the names Redis 7.0
// would use for the same contents, so tools that look see something
// familiar.
func (j *shardJob) object(t *shard.Table, c *Command, now int64) Reply {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok {
		return nilReply()
	}
	switch c.N[0] {
	case ObjectRefCount:
		return intReply(1)
	case ObjectIdleTime:
		return intReply(0)
	case ObjectMemoryUsage:
		return intReply(int64(t.EntryBytes(e)))
	case ObjectFreq:
		if j.e.hotOff.Load() {
			return errReply(errNoLFU)
		}
		return intReply(j.hotFreq(c, now))
	}
	return Reply{Kind: ReplyBulk, Str: encodingName(e)}
}

var errNoLFU = errors.New("An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")

func encodingName(e shard.Entry) string {
	small := func(limit int, maxLen int) bool {
		if collCount(e.Payload) > limit {
			return false
		}
		it := iterStrings(e.Payload)
		for it.more() {
			if len(it.next()) > maxLen {
				return false
			}
		}
		return true
	}
	switch e.Kind {
	case shard.KindString:
		if _, err := ParseInt64(e.Payload); err == nil {
			return "int"
		}
		if len(e.Payload) <= 44 {
			return "embstr"
		}
		return "raw"
	case shard.KindHash:
		if small(128, 64) {
			return "listpack"
		}
		return "hashtable"
	case shard.KindList:
		return "quicklist"
	case shard.KindSet:
		if collCount(e.Payload) > 512 {
			return "hashtable"
		}
		it := iterStrings(e.Payload)
		for it.more() {
			if _, err := ParseInt64(it.next()); err != nil {
				return "hashtable"
			}
		}
		return "intset"
	case shard.KindZSet:
		// The sorted set records which encoding Redis would hold.
		if _, big := zHeader(e.Payload); big {
			return "skiplist"
		}
		return "listpack"
	}
	return "raw"
}
