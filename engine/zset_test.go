package engine

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zrun executes one command on e and returns its reply (valid until the
// next call).
func zrun(t testing.TB, e *Engine, b *Batch, op Op, key string, args ...string) Reply {
	t.Helper()
	b.Reset()
	c := b.Add()
	c.Op, c.Key = op, []byte(key)
	for _, a := range args {
		c.Args = append(c.Args, []byte(a))
	}
	e.Execute(b, time.Now().UnixNano())
	return b.Replies[0]
}

// zflat renders a reply compactly for comparisons.
func zflat(r Reply) string {
	switch r.Kind {
	case ReplyInt:
		return strconv.FormatInt(r.Int, 10)
	case ReplyBulk:
		if r.Bulk != nil {
			return string(r.Bulk)
		}
		return r.Str
	case ReplyDouble:
		return FormatDouble(r.Float)
	case ReplyNil:
		return "nil"
	case ReplyError:
		return "ERR " + r.Err.Error()
	case ReplyArray, ReplyPairs:
		var parts []string
		for _, it := range r.Items {
			parts = append(parts, zflat(it))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "?"
}

func TestZSetEncodingLikeRedis(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	var b Batch
	check := func(want string, op Op, key string, args ...string) {
		t.Helper()
		if got := zflat(zrun(t, e, &b, op, key, args...)); got != want {
			t.Errorf("%v %s %q: got %s, want %s", op, key, args, got, want)
		}
	}
	// A small set stores -0 as 0 (a listpack's integer); ZADD INCR still
	// answers the sum it computed.
	check("-0", OpZAdd, "s", "INCR", "-0", "m")
	check("0", OpZScore, "s", "m")
	check("1", OpZAdd, "s", "1e17", "big")
	check("[0 [m 0 big 100000000000000000]]", OpZScan, "s", "0")
	// Past 128 members Redis converts to a skiplist, which keeps -0 and
	// prints ZSCAN's scores with %.17g.
	args := []string{}
	for i := range 128 {
		args = append(args, strconv.Itoa(i), "x"+strconv.Itoa(i))
	}
	check("128", OpZAdd, "s", args...)
	check("130", OpZCard, "s")
	check("1", OpZAdd, "s", "-0", "neg")
	check("-0", OpZScore, "s", "neg")
	r := zflat(zrun(t, e, &b, OpZScan, "s", "0", "MATCH", "big"))
	if r != "[0 [big 1e+17]]" {
		t.Errorf("ZSCAN of a big set: %s", r)
	}
	// Removing members does not convert back.
	check("130", OpZRemRangeByRank, "s", "0", "-2")
	check("1", OpZAdd, "s", "-0", "neg2")
	check("-0", OpZScore, "s", "neg2")
	// A new key whose first member is long starts as a skiplist.
	long := strings.Repeat("l", 65)
	check("2", OpZAdd, "t", "1", long, "-0", "n")
	check("-0", OpZScore, "t", "n")
	check("1", OpZAdd, "u", "1", strings.Repeat("l", 64))
	check("1", OpZAdd, "u", "-0", "n")
	check("0", OpZScore, "u", "n")
}

// zmodel is a plain sorted set to check the encoded one against.
type zmodel map[string]float64

func (m zmodel) sorted() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		switch sa, sb := m[a], m[b]; {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

func (m zmodel) render() string {
	var parts []string
	for _, k := range m.sorted() {
		parts = append(parts, k, FormatDouble(m[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestZSetAgainstModel drives the in-place edits (one member added,
// moved, removed; ranges cut) and the scratch-built ones (several
// members) at random, and checks the whole set after each step.
func TestZSetAgainstModel(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	r := rand.New(rand.NewPCG(1, 2))
	m := zmodel{}
	member := func() string {
		if r.IntN(20) == 0 {
			return strings.Repeat("w", 100+r.IntN(200))
		}
		return "m" + strconv.Itoa(r.IntN(60))
	}
	score := func() float64 { return float64(r.IntN(40)-20) / 2 }
	for step := range 20000 {
		switch r.IntN(7) {
		case 0, 1:
			k, s := member(), score()
			zrun(t, e, &b, OpZAdd, "k", FormatDouble(s), k)
			m[k] = s
		case 2:
			var args []string
			for range 1 + r.IntN(5) {
				k, s := member(), score()
				args = append(args, FormatDouble(s), k)
				m[k] = s
			}
			zrun(t, e, &b, OpZAdd, "k", args...)
		case 3:
			k, d := member(), score()
			zrun(t, e, &b, OpZIncrBy, "k", FormatDouble(d), k)
			m[k] += d
		case 4:
			k := member()
			got := zrun(t, e, &b, OpZRem, "k", k)
			_, had := m[k]
			if (got.Int == 1) != had {
				t.Fatalf("step %d: ZREM %s = %d, model has it: %v", step, k, got.Int, had)
			}
			delete(m, k)
		case 5:
			lo := score()
			hi := lo + float64(r.IntN(4))
			got := zrun(t, e, &b, OpZRemRangeByScore, "k", FormatDouble(lo), FormatDouble(hi))
			n := 0
			for k, s := range m {
				if s >= lo && s <= hi {
					delete(m, k)
					n++
				}
			}
			if got.Int != int64(n) {
				t.Fatalf("step %d: ZREMRANGEBYSCORE %v %v = %d, want %d", step, lo, hi, got.Int, n)
			}
		case 6:
			if r.IntN(4) == 0 {
				n := r.IntN(3)
				zrun(t, e, &b, OpZPopMax, "k", strconv.Itoa(n))
				keys := m.sorted()
				for i := len(keys) - 1; i >= 0 && i >= len(keys)-n; i-- {
					delete(m, keys[i])
				}
			}
		}
		got := zflat(zrun(t, e, &b, OpZRange, "k", "0", "-1", "WITHSCORES"))
		if got != m.render() {
			t.Fatalf("step %d:\n got  %s\n want %s", step, got, m.render())
		}
		if n := zrun(t, e, &b, OpZCard, "k").Int; n != int64(len(m)) {
			t.Fatalf("step %d: ZCARD %d, want %d", step, n, len(m))
		}
	}
}

// slidingLog fills batch with the rate limiter's pattern on key: drop what
// left the window, count, log this request, keep the key alive.
type slidingLog struct {
	key, inf, now, cutoff, member, ttl []byte
	window                             int64 // ms; default 100 s
}

func (s *slidingLog) fill(b *Batch, at int64, seq int) {
	window := s.window
	if window == 0 {
		window = 100_000
	}
	s.now = strconv.AppendInt(s.now[:0], at, 10)
	s.cutoff = strconv.AppendInt(s.cutoff[:0], at-window, 10)
	s.member = strconv.AppendInt(append(s.member[:0], s.now...), int64(seq), 36)
	b.Reset()
	c := b.Add()
	c.Op, c.Key = OpZRemRangeByScore, s.key
	c.Args = append(c.Args, s.inf, s.cutoff)
	c = b.Add()
	c.Op, c.Key = OpZCard, s.key
	c = b.Add()
	c.Op, c.Key = OpZAdd, s.key
	c.Args = append(c.Args, s.now, s.member)
	c = b.Add()
	c.Op, c.Key, c.Flags, c.N[0] = OpExpire, s.key, FlagRelative, int64(200*time.Second)
}

// TestZSetSlidingLogAllocates nothing per request once warm: a log of
// about 100 members, the oldest removed and a newest appended each time.
func TestZSetSlidingLogAllocates(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	s := slidingLog{key: []byte("rl:user:1"), inf: []byte("-inf")}
	at, seq := int64(1_700_000_000_000), 0
	step := func() {
		at += 1000 // 100 requests per 100 s window
		seq++
		s.fill(&b, at, seq)
		e.Execute(&b, time.Now().UnixNano())
	}
	for range 300 {
		step()
	}
	if n := b.Replies[1].Int; n < 99 || n > 100 {
		t.Fatalf("ZCARD of the log: %d, want about 100", n)
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs > 0 {
		t.Errorf("sliding log: %.1f allocations per request, want 0", allocs)
	}
	if got := zflat(b.Replies[0]); got != "1" {
		t.Errorf("ZREMRANGEBYSCORE removed %s, want 1", got)
	}
}

func BenchmarkZSetSlidingLog(b *testing.B) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var batch Batch
	s := slidingLog{key: []byte("rl:user:1"), inf: []byte("-inf")}
	at := int64(1_700_000_000_000)
	b.ReportAllocs()
	for i := range b.N + 200 {
		if i == 200 {
			b.ResetTimer()
		}
		at += 1000
		s.fill(&batch, at, i)
		e.Execute(&batch, time.Now().UnixNano())
	}
}

func TestZStrtod(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1", 1, true}, {" 1", 1, true}, {"\t-2.5", -2.5, true}, {"", 0, true}, {"  ", 0, false},
		{"1e400", math.Inf(1), true}, {"-1e400", math.Inf(-1), true}, {"1e-400", 0, true},
		{"inf", math.Inf(1), true}, {"-Infinity", math.Inf(-1), true}, {"infin", 0, false},
		{"nan", 0, false}, {"NaN(1)", 0, false}, {"0x10", 16, true}, {"0x1p3", 8, true}, {"0x", 0, false},
		{"0x.8", 0.5, true}, {"1\x00zz", 1, true}, {"\x00", 0, true}, {"1e", 0, false}, {"1e+", 0, false},
		{"1e+2", 100, true}, {".5", 0.5, true}, {"5.", 5, true}, {".", 0, false}, {"+", 0, false},
		{"-", 0, false}, {"1.5.5", 0, false}, {"x", 0, false}, {"1x", 0, false}, {"007", 7, true},
		{"1_000", 0, false}, {"0b1", 0, false}, {"1 ", 0, false},
	} {
		got, ok := zStrtod([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("zStrtod(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if v, ok := zStrtod([]byte("-0")); !ok || !math.Signbit(v) {
		t.Errorf("zStrtod(-0) = %v, %v", v, ok)
	}
}

func TestZScanCursor(t *testing.T) {
	for in, want := range map[string]bool{
		"0": true, "": true, "+5": true, "-1": true, "18446744073709551615": true, "18446744073709551616": false,
		" 0": false, "-": false, "+": false, "x": false, "1.5": false, "0\x00x": true, "00": true, "1 ": false,
	} {
		if got := zScanCursorOK([]byte(in)); got != want {
			t.Errorf("zScanCursorOK(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestZScanScore(t *testing.T) {
	for _, c := range []struct {
		f    float64
		big  bool
		want string
	}{
		{1e17, false, "100000000000000000"}, {1e17, true, "1e+17"}, {1 << 62, false, "4611686018427387904"},
		{1<<62 + 1024, false, "4.6116860184273889e+18"}, {0.1, false, "0.10000000000000001"},
		{math.Inf(-1), false, "-inf"}, {math.Copysign(0, -1), true, "-0"}, {-3, false, "-3"}, {2.5, true, "2.5"},
	} {
		if got := string(zScanScore(nil, c.f, c.big)); got != c.want {
			t.Errorf("zScanScore(%v, %v) = %s, want %s", c.f, c.big, got, c.want)
		}
	}
}

func TestZLexRangeEmpty(t *testing.T) {
	parse := func(a, b string) zLexRange {
		r, ok := zParseLexRange([]byte(a), []byte(b))
		if !ok {
			t.Fatalf("%q %q did not parse", a, b)
		}
		return r
	}
	for _, c := range []struct {
		min, max string
		empty    bool
	}{
		{"-", "+", false}, {"+", "-", true}, {"-", "-", true}, {"+", "+", true}, {"[a", "[a", false},
		{"(a", "[a", true}, {"[b", "[a", true}, {"[a", "+", false}, {"-", "[a", false}, {"[a", "-", true},
	} {
		r := parse(c.min, c.max)
		if r.empty() != c.empty {
			t.Errorf("%q %q: empty %v, want %v", c.min, c.max, r.empty(), c.empty)
		}
	}
	if !bytes.Equal(parse("[a\x00b", "+").min.v, []byte("a\x00b")) {
		t.Error("a lex bound keeps its bytes after a NUL")
	}
}

func BenchmarkZLocateAppend(b *testing.B) {
	p := []byte{0, 0, 0, 0}
	for i := range 100 {
		m := strconv.AppendInt([]byte("1700000000000-"), int64(i), 36)
		p = append(p, make([]byte, zEntrySize(m))...)
		zPutEntry(p[len(p)-zEntrySize(m):], float64(1_700_000_000_000+i), m)
	}
	m := []byte("1700000000000-zz")
	for range b.N {
		zLocate(p, m, 1_800_000_000_000)
	}
}

// TestZSetNearMaxRecord: the headroom a growing record gets never makes
// it too large while its members still fit.
func TestZSetNearMaxRecord(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	// Record: kind, expiry, key "k" and the payload's length (14 bytes),
	// then the payload: 16 entries of 11+L bytes after the count word,
	// leaving 1000 bytes, less than the headroom the last would get.
	const payload = 1<<20 - 14 - 1000
	l := (payload-4)/16 - 11
	for i := range 16 {
		m := strings.Repeat("x", l-2) + strconv.Itoa(10+i)
		if r := zrun(t, e, &b, OpZAdd, "k", strconv.Itoa(i), m); r.Kind == ReplyError {
			t.Fatalf("ZADD %d: %v", i, r.Err)
		}
	}
	if r := zrun(t, e, &b, OpZAdd, "k", "99", strings.Repeat("y", 2000)); r.Kind != ReplyError || !strings.Contains(r.Err.Error(), "too large") {
		t.Fatalf("ZADD past 1 MiB: %s", zflat(r))
	}
	if got := zrun(t, e, &b, OpZCard, "k").Int; got != 16 {
		t.Fatalf("ZCARD %d", got)
	}
}
