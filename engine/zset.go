package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"

	"github.com/sluicehq/sluice/shard"
)

// Sorted sets: ZADD, ZINCRBY, ZREM, ZCARD, ZCOUNT, ZLEXCOUNT, ZSCORE,
// ZMSCORE, ZRANK, ZREVRANK, the ZRANGE family, the ZREMRANGE family,
// ZPOPMIN, ZPOPMAX and ZSCAN, with Redis 7.0's semantics.
//
// A sorted set is an inline collection (see collection.go): a count word,
// then (score f64 LE | uvarint length | member) entries ordered by score,
// then by member bytes, which is Redis's order (-0 and 0 are equal scores,
// ties go by member), then possibly some slack: unused bytes the count
// word accounts for (see zHeader), so collCount and iterZSet do not apply.
//
// Redis keeps a small sorted set in a listpack and a big one in a
// skiplist, and two things a client can see depend on which: a listpack
// stores an integral score as an integer, so -0 comes back as 0, and
// ZSCAN prints the scores of a listpack as the listpack holds them
// (integers in full) but those of a skiplist with %.17g. The top bit of
// the count word records what Redis would hold, decided as Redis decides
// it (more than 128 members, or a member longer than 64 bytes, converts;
// nothing converts back while the key lives), so both come out as
// Redis's.
//
// Hot paths work on the record in place: ZCARD reads the count; removing
// a range (ZREMRANGEBYSCORE of the oldest entries of a sliding log) and
// adding one member (at the end, for the newest) cost one walk and one
// move of the bytes after the edit, inside the record (it keeps some
// slack, see zHeader), with no per-member decoding and no allocation.

// Op numbers: fixed forever (journals and Raft logs hold them).
const (
	OpZAdd             Op = 100 // ZADD: Args as sent
	OpZIncrBy          Op = 101 // ZINCRBY
	OpZRem             Op = 102 // ZREM
	OpZCard            Op = 103 // ZCARD
	OpZCount           Op = 104 // ZCOUNT
	OpZLexCount        Op = 105 // ZLEXCOUNT
	OpZScore           Op = 106 // ZSCORE
	OpZMScore          Op = 107 // ZMSCORE
	OpZRank            Op = 108 // ZRANK
	OpZRevRank         Op = 109 // ZREVRANK
	OpZRange           Op = 110 // ZRANGE
	OpZRangeByScore    Op = 111 // ZRANGEBYSCORE
	OpZRevRangeByScore Op = 112 // ZREVRANGEBYSCORE
	OpZRevRange        Op = 113 // ZREVRANGE
	OpZRangeByLex      Op = 114 // ZRANGEBYLEX
	OpZRevRangeByLex   Op = 115 // ZREVRANGEBYLEX
	OpZRemRangeByScore Op = 116 // ZREMRANGEBYSCORE
	OpZRemRangeByRank  Op = 117 // ZREMRANGEBYRANK
	OpZRemRangeByLex   Op = 118 // ZREMRANGEBYLEX
	OpZPopMin          Op = 119 // ZPOPMIN
	OpZPopMax          Op = 120 // ZPOPMAX
	OpZScan            Op = 121 // ZSCAN
)

func zsetOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpZAdd:             {Name: "zadd", Writes: true, Creates: true, Keys: KeysOne, changed: zaddChanged, apply: zBigWrite(plain((*shardJob).zadd), zaddFast)},
		OpZIncrBy:          {Name: "zincrby", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: zBigWrite(plain((*shardJob).zincrby), nil)},
		OpZRem:             {Name: "zrem", Writes: true, Keys: KeysOne, changed: removedSome, apply: zBigWrite(plain((*shardJob).zrem), nil)},
		OpZCard:            {Name: "zcard", Keys: KeysOne, apply: (*shardJob).zcard},
		OpZCount:           {Name: "zcount", Keys: KeysOne, apply: (*shardJob).zcount},
		OpZLexCount:        {Name: "zlexcount", Keys: KeysOne, apply: (*shardJob).zlexcount},
		OpZScore:           {Name: "zscore", Keys: KeysOne, apply: (*shardJob).zscore},
		OpZMScore:          {Name: "zmscore", Keys: KeysOne, apply: (*shardJob).zmscore},
		OpZRank:            {Name: "zrank", Keys: KeysOne, apply: (*shardJob).zrank},
		OpZRevRank:         {Name: "zrevrank", Keys: KeysOne, apply: (*shardJob).zrevrank},
		OpZRange:           {Name: "zrange", Keys: KeysOne, apply: zrangeOp(zrAuto, zrAuto)},
		OpZRangeByScore:    {Name: "zrangebyscore", Keys: KeysOne, apply: zrangeOp(zrByScore, zrForward)},
		OpZRevRangeByScore: {Name: "zrevrangebyscore", Keys: KeysOne, apply: zrangeOp(zrByScore, zrReverse)},
		OpZRevRange:        {Name: "zrevrange", Keys: KeysOne, apply: zrangeOp(zrByRank, zrReverse)},
		OpZRangeByLex:      {Name: "zrangebylex", Keys: KeysOne, apply: zrangeOp(zrByLex, zrForward)},
		OpZRevRangeByLex:   {Name: "zrevrangebylex", Keys: KeysOne, apply: zrangeOp(zrByLex, zrReverse)},
		OpZRemRangeByScore: {Name: "zremrangebyscore", Writes: true, Keys: KeysOne, changed: removedSome, apply: zBigWrite(plain((*shardJob).zremrangebyscore), zremrangebyscoreFast)},
		OpZRemRangeByRank:  {Name: "zremrangebyrank", Writes: true, Keys: KeysOne, changed: removedSome, apply: zBigWrite(plain((*shardJob).zremrangebyrank), nil)},
		OpZRemRangeByLex:   {Name: "zremrangebylex", Writes: true, Keys: KeysOne, changed: removedSome, apply: zBigWrite(plain((*shardJob).zremrangebylex), nil)},
		OpZPopMin:          {Name: "zpopmin", Writes: true, Keys: KeysOne, changed: poppedSome, apply: zBigWrite(plain((*shardJob).zpopmin), nil)},
		OpZPopMax:          {Name: "zpopmax", Writes: true, Keys: KeysOne, changed: poppedSome, apply: zBigWrite(plain((*shardJob).zpopmax), nil)},
		OpZScan:            {Name: "zscan", Keys: KeysOne, apply: (*shardJob).zscan},
	}
}

// zaddChanged: ZADD changed nothing when it failed or, with INCR, when its
// condition kept the member as it was (a nil reply).
func zaddChanged(_ *Command, r *Reply) bool { return r.Kind != ReplyError && r.Kind != ReplyNil }

// removedSome: a removal changed state when it removed something.
func removedSome(_ *Command, r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

// poppedSome: a pop changed state when it returned members.
func poppedSome(_ *Command, r *Reply) bool {
	return (r.Kind == ReplyArray || r.Kind == ReplyPairs) && len(r.Items) > 0
}

// Errors of the sorted-set commands, in Redis's words.
var (
	errZNaN           = errors.New("resulting score is not a number (NaN)")
	errZXXNX          = errors.New("XX and NX options at the same time are not compatible")
	errZGTLTNX        = errors.New("GT, LT, and/or NX options at the same time are not compatible")
	errZIncrPair      = errors.New("INCR option supports a single increment-element pair")
	errZMinMaxFloat   = errors.New("min or max is not a float")
	errZMinMaxLex     = errors.New("min or max not valid string range item")
	errZLimitByRank   = errors.New("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	errZWithScoresLex = errors.New("syntax error, WITHSCORES not supported in combination with BYLEX")
	errZNotPositive   = errors.New("value is out of range, must be positive")
	errZInvalidCursor = errors.New("invalid cursor")
)

// Redis's listpack limits (zset-max-listpack-entries, -value at their
// defaults): past them Redis converts a sorted set to a skiplist.
const (
	zMaxListpackEntries = 128
	zMaxListpackValue   = 64
)

// The count word of a sorted set: the member count in its low 17 bits (a
// record of at most 1 MiB holds fewer than 2^17 entries), the mark of a
// set with a member index in bit 17 (zset_big.go), then the bytes of
// slack after the last entry in bits 20-30 (up to 2047: room kept so that
// a sliding log, one entry out and one in, edits its record in place
// instead of moving it; an indexed set keeps its slack in its trailer),
// then in the top bit the mark of a sorted set Redis would hold as a
// skiplist.
const (
	zCountMask  = 1<<17 - 1
	zIndexed    = 1 << 17
	zSlackShift = 20
	zSlackMax   = 1<<11 - 1
	zBig        = 1 << 31
)

// zHeader is a sorted set payload's member count and big mark.
func zHeader(p []byte) (count int, big bool) {
	h := binary.LittleEndian.Uint32(p)
	return int(h & zCountMask), h&zBig != 0
}

// zData is the payload without its slack (and member index): the count
// word and the entries.
func zData(p []byte) []byte {
	if zIsIndexed(p) {
		return p[:zIdxOf(p).dataEnd()]
	}
	slack := int(binary.LittleEndian.Uint32(p)>>zSlackShift) & zSlackMax
	return p[:len(p)-slack]
}

func zPutHeader(p []byte, count int, big bool, slack int) {
	h := uint32(count) | uint32(slack)<<zSlackShift
	if big {
		h |= zBig
	}
	binary.LittleEndian.PutUint32(p, h)
}

// zStoreCount is what storeCollection is given as the count of a payload
// built in the job's scratch buffer (no slack): the mark travels in its
// top bit, and an empty set is deleted.
func zStoreCount(count int, big bool) int {
	if count > 0 && big {
		return count | zBig
	}
	return count
}

// zHeadroom is the slack a record that has to grow gets: an eighth of
// its data (at most zSlackMax), so that a growing set moves its record
// once per eighth of growth rather than at every member.
func zHeadroom(data int) int { return min(zSlackMax, data/8) }

// zNorm is the score as Redis stores it: a listpack holds an integral
// score as an integer, which turns -0 into 0; a skiplist keeps the double.
func zNorm(score float64, big bool) float64 {
	if score == 0 && !big {
		return 0
	}
	return score
}

// zEntryAt decodes the entry at off: its score, member (aliasing p) and
// where the next entry starts.
func zEntryAt(p []byte, off int) (score float64, member []byte, end int) {
	score = math.Float64frombits(binary.LittleEndian.Uint64(p[off:]))
	n, w := uvarintFast(p[off+8:])
	s := off + 8 + w
	return score, p[s : s+n : s+n], s + n
}

// zScoreAt is the score of the entry at off.
func zScoreAt(p []byte, off int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(p[off:]))
}

// zNext is where the entry after the one at off starts.
func zNext(p []byte, off int) int {
	n, w := uvarintFast(p[off+8:])
	return off + 8 + w + n
}

// zEntrySize is the encoded size of an entry for member.
func zEntrySize(member []byte) int {
	n := 9
	for v := uint(len(member)); v >= 0x80; v >>= 7 {
		n++
	}
	return n + len(member)
}

// zPutEntry encodes an entry at the start of dst.
func zPutEntry(dst []byte, score float64, member []byte) {
	binary.LittleEndian.PutUint64(dst, math.Float64bits(score))
	w := binary.PutUvarint(dst[8:], uint64(len(member)))
	copy(dst[8+w:], member)
}

// zAfter reports whether entry (s, m) sorts after (score, member).
func zAfter(s float64, m []byte, score float64, member []byte) bool {
	return s > score || (s == score && bytes.Compare(m, member) > 0)
}

// zFind finds member: its entry's offsets and score; off < 0 when absent.
func zFind(p []byte, member []byte) (off, end int, score float64) {
	for off = collHeader; off < len(p); off = end {
		var ms int
		ms, end = zMemberAt(p, off)
		if zSame(p[ms:end], member) {
			return off, end, zScoreAt(p, off)
		}
	}
	return -1, -1, 0
}

// zInsertPos is where (score, member) goes among p's entries other than
// the one at skip: the offset of the first entry after it.
func zInsertPos(p []byte, score float64, member []byte, skip int) int {
	for off := collHeader; off < len(p); {
		s, m, end := zEntryAt(p, off)
		if off != skip && zAfter(s, m, score, member) {
			return off
		}
		off = end
	}
	return len(p)
}

// zLocate walks p once for ZADD: member's entry (off < 0 when absent) and
// where (score, member) goes among the other entries. It is the walk
// every new member pays (a sliding log's, at the end), so it decodes no
// more than it compares.
func zLocate(p []byte, member []byte, score float64) (off, end int, cur float64, ins int) {
	off, end, ins = -1, -1, -1
	for o := collHeader; o < len(p); {
		ms, me := o+9, o+9+int(p[o+8])
		if p[o+8] >= 0x80 {
			ms, me = zLongMemberAt(p, o)
		}
		m := p[ms:me]
		if off < 0 && zSame(m, member) {
			off, end, cur = o, me, zScoreAt(p, o)
			if ins >= 0 {
				break
			}
		} else if ins < 0 {
			if s := zScoreAt(p, o); s > score || (s == score && bytes.Compare(m, member) > 0) {
				ins = o
				if off >= 0 {
					break
				}
			}
		}
		o = me
	}
	if ins < 0 {
		ins = len(p)
	}
	return off, end, cur, ins
}

// zMemberAt is where the member of the entry at off starts and ends.
func zMemberAt(p []byte, off int) (start, end int) {
	if n := int(p[off+8]); n < 0x80 {
		return off + 9, off + 9 + n
	}
	return zLongMemberAt(p, off)
}

func zLongMemberAt(p []byte, off int) (start, end int) {
	n, w := binary.Uvarint(p[off+8:])
	return off + 8 + w, off + 8 + w + int(n)
}

// zSame reports whether two members are equal, looking at the last byte
// first (members of a log often share a long prefix, a timestamp).
func zSame(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || a[len(a)-1] == b[len(b)-1]) && bytes.Equal(a, b)
}

// zMove rewrites, in place, the entry at [off, end) as (score, member) at
// ins, an entry boundary outside it (from zInsertPos skipping off): the
// entries between shift over by one entry's size.
func zMove(p []byte, off, end, ins int, score float64, member []byte) {
	size := end - off
	switch {
	case ins == end:
		ins = off
		fallthrough
	case ins <= off:
		copy(p[ins+size:end], p[ins:off])
	default:
		copy(p[off:], p[end:ins])
		ins -= size
	}
	zPutEntry(p[ins:], score, member)
}

// zInsert adds (score, member) at offset ins of the key's sorted set
// (creating the key when ok is false), which then holds count members:
// into the record's slack when there is room, else into a record grown
// with some headroom.
func (j *shardJob) zInsert(t *shard.Table, c *Command, e shard.Entry, ok bool, ins int, score float64, member []byte, count int, big bool) error {
	size := zEntrySize(member)
	if !ok {
		ne, err := j.create(t, c, shard.KindZSet, 0, collHeader+size)
		if err != nil {
			return err
		}
		zPutHeader(ne.Payload, count, big, 0)
		zPutEntry(ne.Payload[collHeader:], score, member)
		return nil
	}
	p := e.Payload
	end := len(zData(p))
	if len(p)-end < size {
		if err := j.growable(); err != nil {
			return err
		}
		ne, err := t.Resize(e, end+size+zHeadroom(end+size))
		if errors.Is(err, shard.ErrTooLarge) {
			// The headroom must not be what makes a record too large.
			ne, err = t.Resize(e, end+size)
		}
		if err != nil {
			return err
		}
		p = ne.Payload
	}
	copy(p[ins+size:end+size], p[ins:end])
	zPutEntry(p[ins:], score, member)
	zPutHeader(p, count, big, len(p)-end-size)
	return nil
}

// zCut removes the entries at offsets [from, to), leaving count members
// (deleting the key at 0): in place, the bytes freed becoming slack,
// unless that leaves too much of it, when the record shrinks.
func (j *shardJob) zCut(t *shard.Table, e shard.Entry, from, to, count int, big bool) error {
	if count == 0 {
		t.Delete(e)
		return nil
	}
	p := e.Payload
	end := len(zData(p))
	newEnd := end - (to - from)
	if slack := len(p) - newEnd; slack <= zSlackMax && slack <= newEnd/4+64 {
		copy(p[from:], p[to:end])
		zPutHeader(p, count, big, slack)
		return nil
	}
	// The tail goes through the scratch buffer: Resize keeps only the
	// record's head, and a failure must leave the set as it was.
	j.scratch = append(j.scratch[:0], p[to:end]...)
	keep := zHeadroom(newEnd)
	ne, err := t.Resize(e, newEnd+keep)
	if err != nil {
		return err
	}
	copy(ne.Payload[from:], j.scratch)
	zPutHeader(ne.Payload, count, big, keep)
	return nil
}

// zIndex is random access to a sorted set's entries (p is the data,
// without slack): their offsets, kept in the job's scratch buffer (4
// bytes each, then len(p)).
type zIndex struct {
	p    []byte
	offs []byte
	n    int
}

// zIndexOf indexes p's entries into j.scratch.
func (j *shardJob) zIndexOf(p []byte) zIndex {
	n, _ := zHeader(p)
	buf := j.scratch[:0]
	off := collHeader
	for range n {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(off))
		off = zNext(p, off)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(off))
	j.scratch = buf
	return zIndex{p: p, offs: buf, n: n}
}

func (x zIndex) off(i int) int { return int(binary.LittleEndian.Uint32(x.offs[4*i:])) }

func (x zIndex) score(i int) float64 { return zScoreAt(x.p, x.off(i)) }

func (x zIndex) member(i int) []byte {
	_, m, _ := zEntryAt(x.p, x.off(i))
	return m
}

// zWord reports whether arg is the option word w (lower case) in any
// case. Redis compares options with strcasecmp, which stops at a NUL.
func zWord(arg []byte, w string) bool {
	if i := bytes.IndexByte(arg, 0); i >= 0 {
		arg = arg[:i]
	}
	if len(arg) != len(w) {
		return false
	}
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

func zsetLookup(t *shard.Table, c *Command, now int64) (shard.Entry, bool, error) {
	return collection(t, c, now, shard.KindZSet)
}
