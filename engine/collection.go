package engine

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/sluicehq/sluice/shard"
)

// Collections (hashes, lists, sets, sorted sets) live inline in their
// record's payload, as Redis keeps small ones in a listpack: no Go pointer
// per key or per member, so they cost the garbage collector nothing, and a
// small collection costs a few bytes over its contents. Layout:
//
//	count u32 LE | elements
//
//	hash: field, value, field, value, ... in insertion order (Redis's
//	      listpack order, so HGETALL agrees with Redis for small hashes)
//	set:  member, ... in insertion order
//	list: element, ... head first
//	zset: (score f64 LE | member), ... by score, then member bytes; its
//	      count word also holds slack and an encoding mark (zset.go)
//
// where a string is uvarint length | bytes. An operation decodes what it
// needs, writes the new contents into the job's scratch buffer and stores
// them back with storeCollection, which deletes a collection left empty
// (as Redis does) and refuses growth past maxmemory.
const collHeader = 4

// Errors of the data-type commands, in Redis's words (the server adds the
// ERR prefix).
var (
	ErrSyntax        = errors.New("syntax error")
	ErrNotFloat      = errors.New("value is not a valid float")
	ErrNoSuchKey     = errors.New("no such key")
	ErrIndexRange    = errors.New("index out of range")
	ErrNaNOrInfinity = errors.New("increment would produce NaN or Infinity")
)

// collCount is a collection payload's element count (pairs for a hash).
func collCount(p []byte) int { return int(binary.LittleEndian.Uint32(p)) }

// strIter walks the strings of a collection payload.
type strIter struct{ b []byte }

// iterStrings starts at a payload's first element.
func iterStrings(payload []byte) strIter { return strIter{b: payload[collHeader:]} }

// more reports whether another string follows.
func (it *strIter) more() bool { return len(it.b) > 0 }

// next returns the next string; it aliases the payload.
func (it *strIter) next() []byte {
	n, w := uvarintFast(it.b)
	s := it.b[w : w+n : w+n]
	it.b = it.b[w+n:]
	return s
}

// rest is what has not been read yet, still encoded.
func (it *strIter) rest() []byte { return it.b }

func uvarintFast(b []byte) (int, int) {
	if b[0] < 0x80 {
		return int(b[0]), 1
	}
	v, n := binary.Uvarint(b)
	return int(v), n
}

// appendStr appends one encoded string.
func appendStr(buf, s []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// beginCollection resets the job's scratch buffer to an empty collection
// body; elements are appended to j.scratch after it.
func (j *shardJob) beginCollection() {
	j.scratch = append(j.scratch[:0], 0, 0, 0, 0)
}

// collection looks up c's key as a collection of kind: e and ok as lookup
// reports them, WRONGTYPE for a key of another kind.
func collection(t *shard.Table, c *Command, now int64, kind shard.Kind) (shard.Entry, bool, error) {
	return lookup(t, c, now, kind)
}

// storeCollection makes the key's value the collection of count elements
// in j.scratch (built after beginCollection). e and ok are what collection
// returned. A count of 0 deletes the key. A new or longer value is refused
// past maxmemory; an equal or shorter one never is, so removing always
// works. The expiry of an existing collection is kept.
func (j *shardJob) storeCollection(t *shard.Table, c *Command, e shard.Entry, ok bool, kind shard.Kind, count int) error {
	if count == 0 {
		if ok {
			t.Delete(e)
		}
		return nil
	}
	binary.LittleEndian.PutUint32(j.scratch, uint32(count))
	body := j.scratch
	var err error
	switch {
	case ok && len(body) <= len(e.Payload):
		e, err = t.Resize(e, len(body))
	case ok:
		if err = j.growable(); err == nil {
			e, err = t.Resize(e, len(body))
		}
	default:
		// An expired record of this kind may still sit in e: Insert
		// replaces it, and the new collection starts with no expiry.
		e, err = j.create(t, c, kind, 0, len(body))
	}
	if err != nil {
		return err
	}
	copy(e.Payload, body)
	return nil
}

// growable refuses growing state past maxmemory (replays and LIMIT.ALL's
// commit phase excepted, as in create).
func (j *shardJob) growable() error {
	if !j.committing && (j.b == nil || !j.b.replaying) && j.e.overMemory() {
		return ErrOOM
	}
	return nil
}

// bulk is a bulk reply holding a copy of v, safe from later writes.
func (j *shardJob) bulk(v []byte) Reply { return bulkReply(j.copyOut(v)) }

func arrayReply(items []Reply) Reply { return Reply{Kind: ReplyArray, Items: items} }

func doubleReply(f float64) Reply { return Reply{Kind: ReplyDouble, Float: f} }

// emptyArray is the reply for a missing collection's members.
func emptyArray() Reply { return Reply{Kind: ReplyArray, Items: []Reply{}} }

// ParseFloat parses a double as Redis's getDoubleFromObject does (strtod
// over the whole argument): decimal or hex, "inf" and "infinity" in any
// case with an optional sign; no leading space, no trailing bytes, no NaN,
// no overflow. Go's parser also takes digit separators, which strtod does
// not.
func ParseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || isSpace(b[0]) {
		return 0, false
	}
	s := string(b)
	hex := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '_':
			return 0, false
		case 'x', 'X':
			hex = true
		}
	}
	if hex && !containsAny(s, "pP") {
		// strtod reads a hex float without a binary exponent; Go needs one.
		s += "p0"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	if f == 0 && !hex && hasNonZeroDigit(b) {
		// strtod's underflow to zero (ERANGE), which Redis refuses.
		return 0, false
	}
	return f, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func containsAny(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return true
			}
		}
	}
	return false
}

// hasNonZeroDigit reports a nonzero digit in the mantissa (before any
// exponent).
func hasNonZeroDigit(b []byte) bool {
	for _, c := range b {
		if c == 'e' || c == 'E' {
			return false
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// FormatDouble formats f as Redis 7.0 replies a double: %.17g, with inf
// and -inf spelled as Redis spells them.
func FormatDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}
