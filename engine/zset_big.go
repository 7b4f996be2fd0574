package engine

import (
	"encoding/binary"
	"math/bits"

	"github.com/sluicehq/sluice/shard"
)

// Big sorted sets. Past zBigMin members a sorted set carries, at the end
// of its record, a member index and its own slack:
//
//	count word (zIndexed set) | entries | slack | member hashes (cap x u32) | slack u32 | last entry u32 | cap u32
//
// The member hashes are a multiset of 32-bit hashes of the members (open
// addressing, linear probing, at most half full): a hash that is absent
// proves the member absent without walking the entries, and the last
// entry's offset says where a new highest score goes. With the slack an
// eighth of the entries, and the oldest entries cut from the front of the
// record by moving only its head (shard.Table.CutFront), the sliding log's
// two writes cost what they touch, whatever the set's size: ZADD of a new
// member with the highest score, and ZREMRANGEBYSCORE of the lowest
// scores, each O(1) plus the entries removed.
//
// Every other write strips the index first, works on the plain layout
// (zset.go) and indexes the result again: O(n), as those writes already
// are here. Reads never see the index: zData ends before it.
const (
	// zBigMin is the size at which a sorted set gets its member index;
	// zBigKeep the size below which the fast paths give it up.
	zBigMin  = 256
	zBigKeep = 128
	zTrailer = 12
)

func zIsIndexed(p []byte) bool { return binary.LittleEndian.Uint32(p)&zIndexed != 0 }

// zIdx is a view of an indexed sorted set's index. It aliases the payload.
type zIdx struct {
	p     []byte
	tr    int // where the trailer starts
	table []byte
	mask  uint32
}

func zIdxOf(p []byte) zIdx {
	tr := len(p) - zTrailer
	capa := int(binary.LittleEndian.Uint32(p[tr+8:]))
	return zIdx{p: p, tr: tr, table: p[tr-4*capa : tr], mask: uint32(capa - 1)}
}

func (x zIdx) slack() int         { return int(binary.LittleEndian.Uint32(x.p[x.tr:])) }
func (x zIdx) setSlack(n int)     { binary.LittleEndian.PutUint32(x.p[x.tr:], uint32(n)) }
func (x zIdx) lastOff() int       { return int(binary.LittleEndian.Uint32(x.p[x.tr+4:])) }
func (x zIdx) setLastOff(off int) { binary.LittleEndian.PutUint32(x.p[x.tr+4:], uint32(off)) }

// dataEnd is where the entries end.
func (x zIdx) dataEnd() int { return x.tr - len(x.table) - x.slack() }

func (x zIdx) at(i uint32) uint32     { return binary.LittleEndian.Uint32(x.table[4*i:]) }
func (x zIdx) put(i uint32, v uint32) { binary.LittleEndian.PutUint32(x.table[4*i:], v) }

// zMemberHash is a member's hash in the index; never 0 (an empty slot).
func zMemberHash(m []byte) uint32 { return uint32(shard.Hash(m)) | 1 }

func (x zIdx) has(h uint32) bool {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch x.at(i) {
		case 0:
			return false
		case h:
			return true
		}
	}
}

func (x zIdx) add(h uint32) {
	i := h & x.mask
	for x.at(i) != 0 {
		i = (i + 1) & x.mask
	}
	x.put(i, h)
}

// del removes one occurrence of h, shifting the probe run back over the
// hole so that lookups stopping at an empty slot still find the rest.
func (x zIdx) del(h uint32) {
	i := h & x.mask
	for x.at(i) != h {
		if x.at(i) == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	hole := i
	for j := (hole + 1) & x.mask; x.at(j) != 0; j = (j + 1) & x.mask {
		v := x.at(j)
		if (j-v&x.mask)&x.mask >= (j-hole)&x.mask {
			x.put(hole, v)
			hole = j
		}
	}
	x.put(hole, 0)
}

// zTableCap is the hash table size for count members: a power of two at
// least twice count.
func zTableCap(count int) int { return 1 << bits.Len(uint(2*count-1)) }

// zBigWrite wraps a sorted-set write: an indexed set is stripped to the
// plain layout before op runs and indexed again after, so op only ever
// sees the plain layout. fast, when set, is tried first on an indexed
// set: handled false sends the command down the plain path.
func zBigWrite(op, fast func(*shardJob, *shard.Table, *Command, int64) (Reply, bool)) func(*shardJob, *shard.Table, *Command, int64) Reply {
	return func(j *shardJob, t *shard.Table, c *Command, now int64) Reply {
		if e, ok, _ := zsetLookup(t, c, now); ok && zIsIndexed(e.Payload) {
			if fast != nil {
				if r, handled := fast(j, t, c, now); handled {
					return r
				}
				e, _, _ = zsetLookup(t, c, now)
			}
			if err := zStrip(t, e); err != nil {
				return errReply(err)
			}
		}
		r, _ := op(j, t, c, now)
		j.zReindex(t, c, now)
		return r
	}
}

// plain adapts an op that always handles its command.
func plain(op func(*shardJob, *shard.Table, *Command, int64) Reply) func(*shardJob, *shard.Table, *Command, int64) (Reply, bool) {
	return func(j *shardJob, t *shard.Table, c *Command, now int64) (Reply, bool) { return op(j, t, c, now), true }
}

// zStrip turns an indexed set back into the plain layout (keeping at most
// zSlackMax of slack).
func zStrip(t *shard.Table, e shard.Entry) error {
	p := e.Payload
	x := zIdxOf(p)
	end := x.dataEnd()
	slack := min(x.slack(), zSlackMax)
	count, big := zHeader(p)
	ne, err := t.Resize(e, end+slack)
	if err != nil {
		return err
	}
	zPutHeader(ne.Payload, count, big, slack)
	return nil
}

// zReindex gives the key's sorted set its member index if it is big
// enough and has none. Past maxmemory, or where the record would be too
// large, the set stays plain: slower, never wrong.
func (j *shardJob) zReindex(t *shard.Table, c *Command, now int64) {
	e, ok := t.Get(c.Key, c.hash, now)
	if !ok || e.Kind != shard.KindZSet || zIsIndexed(e.Payload) {
		return
	}
	count, big := zHeader(e.Payload)
	if count < zBigMin || j.growable() != nil {
		return
	}
	end := len(zData(e.Payload))
	slack := end / 8
	capa := zTableCap(count)
	ne, err := t.Resize(e, end+slack+4*capa+zTrailer)
	if err != nil {
		return
	}
	p := ne.Payload
	clear(p[end:])
	binary.LittleEndian.PutUint32(p, uint32(count)|zIndexed|zBigBit(big))
	x := zIdxOf(p)
	binary.LittleEndian.PutUint32(p[x.tr+8:], uint32(capa))
	x = zIdxOf(p)
	x.setSlack(slack)
	last := collHeader
	for off := collHeader; off < end; {
		_, m, next := zEntryAt(p, off)
		x.add(zMemberHash(m))
		last, off = off, next
	}
	x.setLastOff(last)
}

func zBigBit(big bool) uint32 {
	if big {
		return zBig
	}
	return 0
}

// zaddFast is ZADD key score member on an indexed set, for a member the
// index proves new whose entry sorts after the last one and fits in the
// slack: an append. Anything else goes down the plain path.
func zaddFast(j *shardJob, t *shard.Table, c *Command, now int64) (Reply, bool) {
	if len(c.Args) != 2 {
		return Reply{}, false
	}
	score, ok := zParseScore(c.Args[0])
	if !ok {
		return Reply{}, false
	}
	member := c.Args[1]
	e, _, _ := zsetLookup(t, c, now)
	p := e.Payload
	x := zIdxOf(p)
	h := zMemberHash(member)
	if x.has(h) {
		return Reply{}, false
	}
	count, big := zHeader(p)
	big = big || len(member) > zMaxListpackValue
	score = zNorm(score, big)
	lastScore, lastMember, _ := zEntryAt(p, x.lastOff())
	size := zEntrySize(member)
	if !zAfter(score, member, lastScore, lastMember) || x.slack() < size {
		return Reply{}, false
	}
	end := x.dataEnd()
	zPutEntry(p[end:], score, member)
	binary.LittleEndian.PutUint32(p, uint32(count+1)|zIndexed|zBigBit(big))
	x.setSlack(x.slack() - size)
	x.setLastOff(end)
	x.add(h)
	return intReply(1), true
}

// zremrangebyscoreFast is ZREMRANGEBYSCORE on an indexed set when the
// range is a prefix (a sliding log dropping its oldest entries) that
// leaves the set big: the removed members leave the index and the record
// sheds them at its front.
func zremrangebyscoreFast(j *shardJob, t *shard.Table, c *Command, now int64) (Reply, bool) {
	r, ok := zParseScoreRange(c.Args[0], c.Args[1])
	if !ok {
		return Reply{}, false
	}
	e, _, _ := zsetLookup(t, c, now)
	p := e.Payload
	x := zIdxOf(p)
	end := x.dataEnd()
	if !r.gteMin(zScoreAt(p, collHeader)) {
		if r.lteMax(zScoreAt(p, collHeader)) {
			// Not a prefix: the range starts further in.
			return Reply{}, false
		}
		return intReply(0), true
	}
	count, big := zHeader(p)
	to, removed := collHeader, 0
	for to < end && r.lteMax(zScoreAt(p, to)) {
		to = zNext(p, to)
		removed++
	}
	switch {
	case removed == 0:
		return intReply(0), true
	case count-removed < zBigKeep:
		return Reply{}, false
	}
	for off := collHeader; off < to; {
		_, m, next := zEntryAt(p, off)
		x.del(zMemberHash(m))
		off = next
	}
	n := to - collHeader
	last := x.lastOff() - n
	if ne, ok := t.CutFront(e, collHeader, n); ok {
		p = ne.Payload
	} else {
		// Too little to leave a dead record behind: move the entries.
		copy(p[collHeader:], p[to:end])
		x.setSlack(x.slack() + n)
	}
	binary.LittleEndian.PutUint32(p, uint32(count-removed)|zIndexed|zBigBit(big))
	zIdxOf(p).setLastOff(last)
	return intReply(int64(removed)), true
}
