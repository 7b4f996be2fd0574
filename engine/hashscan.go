package engine

import (
	"bytes"

	"github.com/sluicehq/sluice/engine/glob"

	"github.com/sluicehq/sluice/shard"
)

// HSCAN and SSCAN. A collection lives inline in one record, so, as Redis
// does for its compact encodings (listpack, intset), one call returns
// every element that matches, with cursor 0: the iteration is over.

// hsValidCursor reports whether b is a cursor Redis's
// parseScanCursorOrReply takes: what strtoul reads in base 10 over the
// whole argument (up to a NUL, where C's string ends), with no leading
// space and no overflow. An optional sign comes first; "-5" wraps, as
// strtoul has it, and "" is cursor 0.
func hsValidCursor(b []byte) bool {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return true
	}
	if isSpace(b[0]) {
		return false
	}
	digits := b
	if b[0] == '+' || b[0] == '-' {
		digits = b[1:]
	}
	if len(digits) == 0 {
		return false
	}
	var v uint64
	for _, ch := range digits {
		if ch < '0' || ch > '9' {
			return false
		}
		d := uint64(ch - '0')
		if v > (^uint64(0)-d)/10 {
			return false // ERANGE
		}
		v = v*10 + d
	}
	return true
}

// hsScan serves HSCAN and SSCAN in the order Redis checks things:
// the cursor, then the key's type, then the options (a missing key
// answers the empty scan without reading them).
func (j *shardJob) hsScan(t *shard.Table, c *Command, now int64, kind shard.Kind) Reply {
	if len(c.Args) == 0 {
		return errReply(ErrSyntax)
	}
	if !hsValidCursor(c.Args[0]) {
		return errReply(errHSInvalidCursor)
	}
	e, ok, err := collection(t, c, now, kind)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return hsScanReply(nil)
	}
	var pattern []byte
	usePattern := false
	for opts := c.Args[1:]; len(opts) > 0; opts = opts[2:] {
		switch {
		case len(opts) >= 2 && hsOptionIs(opts[0], "count"):
			n, err := ParseInt64(opts[1])
			if err != nil {
				return errReply(ErrNotInteger)
			}
			if n < 1 {
				return errReply(ErrSyntax)
			}
		case len(opts) >= 2 && hsOptionIs(opts[0], "match"):
			pattern = opts[1]
			usePattern = !(len(pattern) == 1 && pattern[0] == '*')
		default:
			return errReply(ErrSyntax)
		}
	}
	pat := string(pattern)
	matches := func(s []byte) bool { return !usePattern || glob.Match(pat, string(s)) }
	group := 1
	if kind == shard.KindHash {
		group = 2
	}
	items := make([]Reply, 0, collCount(e.Payload)*group)
	for it := iterStrings(e.Payload); it.more(); {
		s := it.next()
		var v []byte
		if group == 2 {
			v = it.next()
		}
		if !matches(s) {
			continue
		}
		items = append(items, j.bulk(s))
		if group == 2 {
			items = append(items, j.bulk(v))
		}
	}
	return hsScanReply(items)
}

// hsScanReply is a SCAN-family reply ending the iteration: cursor 0 and the
// elements.
func hsScanReply(items []Reply) Reply {
	if items == nil {
		items = []Reply{}
	}
	return arrayReply([]Reply{strReply("0"), arrayReply(items)})
}

// hsOptionIs reports whether b is word (lower case ASCII) in any case,
// compared as C's strcasecmp compares them: up to a NUL.
func hsOptionIs(b []byte, word string) bool {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) != len(word) {
		return false
	}
	for i := range len(b) {
		ch := b[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != word[i] {
			return false
		}
	}
	return true
}
