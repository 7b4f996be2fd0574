package engine

import (
	"bytes"
	"math"
	"strconv"
)

// Argument parsing for the sorted-set commands, as Redis parses them.

// zParseScore parses a ZADD score or ZINCRBY increment as Redis's
// getDoubleFromObject does (ParseFloat), short-cutting plain integers of
// up to 15 digits, which are exact doubles (a sliding log's timestamps).
func zParseScore(b []byte) (float64, bool) {
	if v, ok := zSmallInt(b); ok {
		return v, true
	}
	return ParseFloat(b)
}

// zSmallInt parses an optional '-' and 1 to 15 digits.
func zSmallInt(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	neg := b[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	if i == len(b) {
		return 0, false
	}
	var v int64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		return -float64(v), true
	}
	return float64(v), true
}

// zScoreRange is a score interval of ZRANGEBYSCORE and friends.
type zScoreRange struct {
	min, max     float64
	minEx, maxEx bool
}

func (r *zScoreRange) gteMin(s float64) bool {
	if r.minEx {
		return s > r.min
	}
	return s >= r.min
}

func (r *zScoreRange) lteMax(s float64) bool {
	if r.maxEx {
		return s < r.max
	}
	return s <= r.max
}

// zParseScoreRange parses min and max as Redis's zslParseRange: an
// optional '(' for an exclusive bound, then what strtod reads.
func zParseScoreRange(min, max []byte) (zScoreRange, bool) {
	var r zScoreRange
	var ok bool
	if r.min, r.minEx, ok = zParseScoreBound(min); !ok {
		return r, false
	}
	if r.max, r.maxEx, ok = zParseScoreBound(max); !ok {
		return r, false
	}
	return r, true
}

func zParseScoreBound(b []byte) (float64, bool, bool) {
	ex := len(b) > 0 && b[0] == '('
	if ex {
		b = b[1:]
	}
	v, ok := zStrtod(b)
	return v, ex, ok
}

// zStrtod is Redis's use of strtod on a range bound: the C string (up to
// a NUL) must be read whole, and not be NaN. Unlike ZADD's scores, a
// bound may start with white space, be empty (0), or overflow (to an
// infinity) or underflow (to zero).
func zStrtod(b []byte) (float64, bool) {
	if v, ok := zSmallInt(b); ok {
		return v, true
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	n, hex, nan := zFloatPrefix(b[i:])
	if n == 0 {
		// No conversion: strtod points back at the start.
		return 0, len(b) == 0
	}
	if nan || i+n != len(b) {
		return 0, false
	}
	s := string(b[i:])
	if hex && !containsAny(s, "pP") {
		s += "p0"
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Overflow: strtod's HUGE_VAL, which is Go's infinity as well.
		if ne, isNum := err.(*strconv.NumError); !isNum || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	if math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// zFloatPrefix is the length of the longest prefix of b that strtod
// reads as a number (0 for none), whether it is hexadecimal, and whether
// it is a NaN.
func zFloatPrefix(b []byte) (n int, hex, nan bool) {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	rest := b[i:]
	switch {
	case zHasPrefixFold(rest, "infinity"):
		return i + 8, false, false
	case zHasPrefixFold(rest, "inf"):
		return i + 3, false, false
	case zHasPrefixFold(rest, "nan"):
		return i + 3, false, true
	}
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		if m := zDigits(rest[2:], true); m > 0 {
			j := i + 2 + m
			if e := zExponent(b[j:], 'p'); e > 0 {
				j += e
			}
			return j, true, false
		}
	}
	m := zDigits(rest, false)
	if m == 0 {
		return 0, false, false
	}
	j := i + m
	if e := zExponent(b[j:], 'e'); e > 0 {
		j += e
	}
	return j, false, false
}

// zDigits is the length of a mantissa at the start of b: digits with at
// most one '.', holding at least one digit; 0 if there is none.
func zDigits(b []byte, hex bool) int {
	digits, dot, i := 0, false, 0
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9', hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			if digits == 0 {
				return 0
			}
			return i
		}
	}
	if digits == 0 {
		return 0
	}
	return i
}

// zExponent is the length of an exponent (e or p, a sign, digits) at the
// start of b, 0 if there is no complete one.
func zExponent(b []byte, letter byte) int {
	if len(b) == 0 || (b[0] != letter && b[0] != letter-'a'+'A') {
		return 0
	}
	i := 1
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start {
		return 0
	}
	return i
}

func zHasPrefixFold(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// zLexBound is one end of a lexicographic range: '-' (below every
// string), '+' (above every string), or a string, inclusive ('[') or
// exclusive ('(').
type zLexBound struct {
	inf int8 // -1 for '-', +1 for '+', 0 for a string
	v   []byte
	ex  bool
}

// zLexRange is a range of ZRANGEBYLEX and friends.
type zLexRange struct{ min, max zLexBound }

// zLexCmp compares member with a bound, as Redis's sdscmplex.
func zLexCmp(m []byte, b *zLexBound) int {
	switch b.inf {
	case -1:
		return 1
	case 1:
		return -1
	}
	return bytes.Compare(m, b.v)
}

func (r *zLexRange) gteMin(m []byte) bool {
	if r.min.ex {
		return zLexCmp(m, &r.min) > 0
	}
	return zLexCmp(m, &r.min) >= 0
}

func (r *zLexRange) lteMax(m []byte) bool {
	if r.max.ex {
		return zLexCmp(m, &r.max) < 0
	}
	return zLexCmp(m, &r.max) <= 0
}

// empty reports a range no string can be in (min above max, or equal
// with an exclusive end).
func (r *zLexRange) empty() bool {
	var cmp int
	a, b := &r.min, &r.max
	switch {
	case a.inf != 0 && a.inf == b.inf:
		cmp = 0
	case a.inf == -1 || b.inf == 1:
		cmp = -1
	case a.inf == 1 || b.inf == -1:
		cmp = 1
	default:
		cmp = bytes.Compare(a.v, b.v)
	}
	return cmp > 0 || (cmp == 0 && (a.ex || b.ex))
}

// zParseLexRange parses min and max as Redis's zslParseLexRange.
func zParseLexRange(min, max []byte) (zLexRange, bool) {
	var r zLexRange
	var ok bool
	if r.min, ok = zParseLexBound(min); !ok {
		return r, false
	}
	if r.max, ok = zParseLexBound(max); !ok {
		return r, false
	}
	return r, true
}

func zParseLexBound(b []byte) (zLexBound, bool) {
	if len(b) == 0 {
		return zLexBound{}, false
	}
	switch b[0] {
	case '+', '-':
		// Redis looks at the C string: "+" then a NUL is still "+".
		if len(b) > 1 && b[1] != 0 {
			return zLexBound{}, false
		}
		if b[0] == '+' {
			return zLexBound{inf: 1, ex: true}, true
		}
		return zLexBound{inf: -1, ex: true}, true
	case '(':
		return zLexBound{v: b[1:], ex: true}, true
	case '[':
		return zLexBound{v: b[1:]}, true
	}
	return zLexBound{}, false
}

// zScanCursorOK checks a ZSCAN cursor as Redis's parseScanCursorOrReply:
// strtoul over the C string, no leading white space, no overflow.
func zScanCursorOK(b []byte) bool {
	if len(b) > 0 && isSpace(b[0]) {
		return false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	if i == len(b) || b[i] < '0' || b[i] > '9' {
		// No conversion: the end pointer is the start of the string.
		return len(b) == 0
	}
	var v uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return false
		}
		v = v*10 + d
	}
	return true
}
