package difftest

import (
	"strconv"
	"strings"
)

// Sorted sets: every ZADD option and clash, scores from the shared pool
// and the edges of Redis's float parsing, every range form and bound
// syntax, pops, ZSCAN, big sets (past 128 members, where Redis switches to
// a skiplist) and the sliding-log pattern of a rate limiter.
func init() {
	Register(Family{Name: "zset", Gens: zsetGens})
}

// Lexicographic ranges over members of different scores are answered by
// a walk in a small Redis sorted set but by a skiplist descent in a big
// one, which depends on its random levels: Redis promises nothing there.
// Arbitrary lex ranges therefore go to keys of their own whose members
// all have score 0 (where every walk agrees); the shared keys get only
// the ranges every walk answers alike ('-' as the start, '+' as the end).
// One more key, zmix{1}, holds short members of mixed scores, never more
// than 40 of them: Redis keeps it a listpack, whose walk is deterministic.
var zlexKeys = []string{"zlex{1}", "zlex{2}", "zmix{1}"}

func (g *Gen) zlexKey() string { return g.Pick(zlexKeys...) }

func isZLexKey(k string) bool { return k == zlexKeys[0] || k == zlexKeys[1] || k == zlexKeys[2] }

// zScore is a score or increment: the shared pool, and now and then the
// corners of Redis's parsing and formatting.
func (g *Gen) zScore() string {
	if g.Chance(5) {
		return g.Pick("-0", "0x1p3", "1e17", "4611686018427387904", "4611686018427387905", "-4611686018427387904",
			"123456789012345678", "1e-310", "1e-400", "1e308", "1.7976931348623157e308", "INF", "-Infinity", "+1",
			"0.30000000000000004", "1e", "1.5e+2", "007", ".5", "5.", "1\x00")
	}
	return g.Float()
}

// zBound is a score range bound.
func (g *Gen) zBound() string {
	switch g.R.IntN(6) {
	case 0:
		return g.Pick("-inf", "+inf", "inf", "(-inf", "(+inf", "-INF")
	case 1:
		return "(" + g.Int(-10, 10)
	case 2:
		return g.Pick("[1", "x", "nan", "(", "", " 1", "1e400", "(1e-400", "0x10", "1\x00x", "(x", "((1", "1.5", "(-0.25", "  ")
	}
	return g.Int(-10, 10)
}

// zBounds is a score range's min and max, mostly in order.
func (g *Gen) zBounds() (string, string) {
	min, max := g.zBound(), g.zBound()
	if !g.Chance(4) {
		a, b := g.R.IntN(25)-12, g.R.IntN(25)-12
		if a > b {
			a, b = b, a
		}
		min, max = strconv.Itoa(a), strconv.Itoa(b)
		if g.Chance(3) {
			min = "(" + min
		}
		if g.Chance(3) {
			max = "(" + max
		}
		if g.Chance(5) {
			min = g.Pick("-inf", "(-inf")
		}
		if g.Chance(5) {
			max = g.Pick("+inf", "inf")
		}
	}
	return min, max
}

// zLexBound is a lex range bound.
func (g *Gen) zLexBound() string {
	switch g.R.IntN(8) {
	case 0:
		return g.Pick("-", "+")
	case 1:
		return g.Pick("m1", "", "+x", "-a", "[", "(", "-\x00", "a")
	case 2:
		return "(" + g.zMember()
	case 3:
		return g.Pick("[", "(") + "x" + strconv.Itoa(g.R.IntN(45))
	}
	return "[" + g.zMember()
}

// zLexPair is a lex range's min and max; on a shared key min is '-'.
func (g *Gen) zLexPair(shared bool) (string, string) {
	min, max := g.zLexBound(), g.zLexBound()
	if shared {
		min = "-"
	}
	return min, max
}

func (g *Gen) zWord(w string) string {
	switch g.R.IntN(4) {
	case 0:
		return strings.ToLower(w)
	case 1:
		return strings.ToUpper(w[:1]) + strings.ToLower(w[1:])
	}
	return strings.ToUpper(w)
}

func (g *Gen) zLimit() []string {
	return []string{g.zWord("limit"), g.Pick("0", "1", "2", "-1", "5", "100", "x"), g.Pick("1", "2", "3", "-1", "0", "10", "x")}
}

// zRank is a ZRANGE index.
func (g *Gen) zRank() string {
	if g.Chance(8) {
		return g.Pick("x", "1.5", "9223372036854775807", "-9223372036854775808", "")
	}
	return g.Int(-12, 12)
}

// zMember is a member, more often one of a few, so that reads find them.
func (g *Gen) zMember() string {
	if g.Chance(3) {
		return "m" + strconv.Itoa(g.R.IntN(5))
	}
	return g.Member()
}

func (g *Gen) zMembers(n int) []string {
	var out []string
	for range n {
		out = append(out, g.zMember())
	}
	return out
}

func zsetGens(g *Gen) []func() [][]string {
	one := func(f func() []string) func() [][]string {
		return func() [][]string { return [][]string{f()} }
	}
	// The sliding log's clock: milliseconds, always moving forward.
	clock := int64(1_700_000_000_000)
	// A big sliding log (hundreds of members, so Sluice indexes it): its
	// own clock and window, seeded whole the first time.
	bigClock, bigSeeded := int64(1_800_000_000_000), map[string]bool{}
	const bigWindow = 400
	return []func() [][]string{
		// ZADD with every option, in any order and case.
		one(func() []string {
			args := []string{"ZADD", g.Key()}
			for _, w := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
				if g.Chance(5) {
					args = append(args, g.zWord(w))
				}
			}
			if g.Chance(3) {
				g.R.Shuffle(len(args)-2, func(a, b int) { args[2+a], args[2+b] = args[2+b], args[2+a] })
			}
			n := 1 + g.R.IntN(3)
			if g.Chance(6) {
				n = 1
			}
			for range n {
				args = append(args, g.zScore(), g.zMember())
			}
			if g.Chance(15) {
				args = append(args, g.zScore())
			}
			return args
		}),
		one(func() []string { return []string{"ZADD", g.Key(), g.zScore(), g.zMember()} }),
		one(func() []string {
			return []string{"ZADD", g.Key(), g.Int(-12, 12), g.zMember(), g.Int(-12, 12), g.zMember()}
		}),
		one(func() []string { return []string{"ZADD", g.Key(), g.Float(), g.zMember()} }),
		one(func() []string {
			return append([]string{"ZADD", g.Key(), g.Pick("NX", "XX", "GT", "LT", "CH")}, g.Pick("1", "INCR", "NX", "x"), g.zMember())
		}),
		// Several members; now and then a big set, which past 128 members
		// Redis holds as a skiplist.
		one(func() []string {
			args := []string{"ZADD", g.Key()}
			if !g.Chance(4) {
				for range 4 + g.R.IntN(7) {
					args = append(args, g.Int(-12, 12), g.zMember())
				}
				return args
			}
			same := g.Chance(3)
			for i := range 150 + g.R.IntN(151) {
				score := strconv.Itoa(g.R.IntN(1000) - 500)
				if same {
					score = "0"
				}
				if g.Chance(40) {
					score = "-0"
				}
				args = append(args, score, "big"+strconv.Itoa(i))
			}
			return args
		}),
		one(func() []string {
			inc := g.zScore()
			if g.Chance(6) {
				inc = g.Pick("NX", "incr", "ch")
			}
			return []string{"ZINCRBY", g.Key(), inc, g.zMember()}
		}),
		// NaN: an infinity plus its opposite.
		func() [][]string {
			k, m := g.Key(), g.zMember()
			return [][]string{
				{"ZADD", k, g.Pick("inf", "-inf"), m},
				{g.Pick("ZINCRBY", "ZADD"), k, g.Pick("inf", "-inf", "1"), m},
				{"ZADD", k, "INCR", g.Pick("GT", "LT", "XX", "NX"), g.Pick("-inf", "+inf"), m},
			}
		},
		one(func() []string { return append([]string{"ZREM", g.Key()}, g.zMembers(1+g.R.IntN(3))...) }),
		one(func() []string { return []string{"ZCARD", g.Key()} }),
		one(func() []string { return []string{"ZSCORE", g.Key(), g.zMember()} }),
		one(func() []string { return append([]string{"ZMSCORE", g.Key()}, g.zMembers(1+g.R.IntN(3))...) }),
		one(func() []string { return []string{g.Pick("ZRANK", "ZREVRANK"), g.Key(), g.zMember()} }),
		one(func() []string {
			min, max := g.zBounds()
			return []string{"ZCOUNT", g.Key(), min, max}
		}),
		one(func() []string {
			if g.Chance(2) {
				k := g.zlexKey()
				min, max := g.zLexPair(false)
				return []string{"ZLEXCOUNT", k, min, max}
			}
			pair := g.zPickArgs([]string{"-", "+"}, []string{"+", "-"}, []string{"-", "-"}, []string{"x", "+"},
				[]string{"-", "y"}, []string{"", "+"}, []string{"[a", "(a"}, []string{"(a", "[a"}, []string{"[b", "[a"}, []string{"+", "+"})
			return []string{"ZLEXCOUNT", g.Key(), pair[0], pair[1]}
		}),
		// ZRANGE with every option.
		one(func() []string {
			k := g.Key()
			by := g.R.IntN(4)
			rev := g.Chance(3)
			var opts [][]string
			var first, second string // as given: min max, or max min with REV
			switch by {
			case 0, 1:
				first, second = g.zRank(), g.zRank()
			case 2:
				opts = append(opts, []string{g.zWord("byscore")})
				first, second = g.zBounds()
				if rev {
					first, second = second, first
				}
			default:
				opts = append(opts, []string{g.zWord("bylex")})
				first, second = g.zLexBound(), g.zLexBound()
				if g.Chance(2) {
					k = g.zlexKey()
				} else if rev {
					first = "+"
				} else {
					first = "-"
				}
			}
			if rev {
				opts = append(opts, []string{g.zWord("rev")})
			}
			if g.Chance(3) {
				opts = append(opts, g.zLimit())
			}
			if g.Chance(2) {
				opts = append(opts, []string{g.zWord("withscores")})
			}
			if g.Chance(12) {
				opts = append(opts, []string{g.Pick("rev", "bylex", "byscore", "limit", "bad")})
			}
			g.R.Shuffle(len(opts), func(a, b int) { opts[a], opts[b] = opts[b], opts[a] })
			args := []string{"ZRANGE", k, first, second}
			for _, o := range opts {
				args = append(args, o...)
			}
			return args
		}),
		one(func() []string {
			name := g.Pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE")
			min, max := g.zBounds()
			if name == "ZREVRANGEBYSCORE" {
				min, max = max, min
			}
			args := []string{name, g.Key(), min, max}
			if g.Chance(2) {
				args = append(args, g.zWord("withscores"))
			}
			if g.Chance(2) {
				args = append(args, g.zLimit()...)
			}
			if g.Chance(10) {
				args = append(args, g.Pick("rev", "byscore", "limit"))
			}
			return args
		}),
		one(func() []string {
			args := []string{g.Pick("ZREVRANGE", "ZRANGE"), g.Key(), g.zRank(), g.zRank()}
			if g.Chance(2) {
				args = append(args, g.zWord("withscores"))
			}
			if g.Chance(10) {
				args = append(args, g.Pick("rev", "limit", "bylex"))
			}
			if g.Chance(10) {
				args = append(args, g.zLimit()...)
			}
			return args
		}),
		one(func() []string {
			rev := g.Chance(2)
			name := "ZRANGEBYLEX"
			if rev {
				name = "ZREVRANGEBYLEX"
			}
			k := g.zlexKey()
			min, max := g.zLexPair(false)
			if g.Chance(3) {
				k = g.Key()
				min, max = "-", g.zLexBound()
			}
			if rev {
				if !isZLexKey(k) {
					min, max = g.zLexBound(), "+"
				}
				min, max = max, min
			}
			args := []string{name, k, min, max}
			if g.Chance(3) {
				args = append(args, g.zLimit()...)
			}
			if g.Chance(10) {
				args = append(args, g.Pick("withscores", "rev", "bylex"))
			}
			return args
		}),
		one(func() []string {
			args := []string{"ZADD", "zmix{1}"}
			for range 1 + g.R.IntN(3) {
				args = append(args, g.Int(-3, 3), "x"+strconv.Itoa(g.R.IntN(40)))
			}
			return args
		}),
		// The lex keys: members all of score 0, sometimes many.
		one(func() []string {
			args := []string{"ZADD", g.Pick(zlexKeys[:2]...)}
			if g.Chance(4) {
				args = append(args, g.Pick("NX", "XX", "CH"))
			}
			n := 1 + g.R.IntN(4)
			if g.Chance(30) {
				n = 150 + g.R.IntN(100)
			}
			for range n {
				m := g.zMember()
				if n > 10 {
					m = "lx" + strconv.Itoa(g.R.IntN(1000))
				}
				args = append(args, "0", m)
			}
			return args
		}),
		one(func() []string {
			return append([]string{"ZREM", g.Pick(zlexKeys[:2]...)}, g.zMembers(1+g.R.IntN(2))...)
		}),
		one(func() []string {
			k := g.zlexKey()
			min, max := g.zLexPair(false)
			if g.Chance(3) {
				k = g.Key()
				min, max = g.zLexPair(true)
			}
			return []string{"ZREMRANGEBYLEX", k, min, max}
		}),
		one(func() []string {
			if g.Chance(3) {
				return []string{"ZRANGE", g.zlexKey(), "0", "-1", "WITHSCORES"}
			}
			return []string{"ZCARD", g.zlexKey()}
		}),
		one(func() []string {
			min, max := g.zBounds()
			return []string{"ZREMRANGEBYSCORE", g.Key(), min, max}
		}),
		one(func() []string { return []string{"ZREMRANGEBYRANK", g.Key(), g.zRank(), g.zRank()} }),
		one(func() []string {
			args := []string{g.Pick("ZPOPMIN", "ZPOPMAX"), g.Key()}
			switch g.R.IntN(5) {
			case 0:
				args = append(args, g.Pick("0", "-1", "x", "1.5", "9223372036854775807"))
			case 1, 2:
				args = append(args, g.Int(1, 4))
			case 3:
				if g.Chance(4) {
					args = append(args, "1", "2")
				}
			}
			return args
		}),
		one(func() []string {
			cursor := "0"
			if g.Chance(4) {
				cursor = g.Pick("x", " 0", "-", "+", "18446744073709551616", "1.5", "", "+0", "-0", "00", "0\x00x")
			}
			args := []string{"ZSCAN", g.Key(), cursor}
			if g.Chance(2) {
				args = append(args, g.zWord("match"), g.Pick("*", "m*", "*1*", "m?", "big1*", "\\*", "*\x00*", ""))
			}
			if g.Chance(3) {
				args = append(args, g.zWord("count"), g.Pick("1", "10", "1000", "0", "-1", "x"))
			}
			if g.Chance(10) {
				args = append(args, g.Pick("TYPE", "match", "count", "novalue"), g.Pick("zset", "1"))
			}
			return args
		}),
		// Arity errors.
		one(func() []string {
			return g.zPickArgs(
				[]string{"ZADD", g.Key(), "1"}, []string{"ZINCRBY", g.Key(), "1"}, []string{"ZREM", g.Key()},
				[]string{"ZCARD"}, []string{"ZCOUNT", g.Key(), "1"}, []string{"ZSCORE", g.Key()},
				[]string{"ZMSCORE", g.Key()}, []string{"ZRANK", g.Key(), "a", "b"}, []string{"ZRANGE", g.Key(), "0"},
				[]string{"ZREMRANGEBYSCORE", g.Key(), "1", "2", "3"}, []string{"ZPOPMIN"}, []string{"ZSCAN", g.Key()},
				[]string{"ZLEXCOUNT", g.Key(), "-"}, []string{"ZREVRANGEBYLEX", g.Key(), "+"},
			)
		}),
		// Other kinds on the shared keys, so that WRONGTYPE comes up.
		one(func() []string {
			if g.Chance(4) {
				return []string{"SET", g.Key(), g.Value()}
			}
			return []string{"DEL", g.Key()}
		}),
		one(func() []string { return []string{"EXPIRE", g.Key(), strconv.Itoa(1000 + g.R.IntN(1000))} }),
		func() [][]string { return [][]string{{"PEXPIRE", g.Key(), "1"}, {Sleep, "3"}} },
		one(func() []string { return []string{"TYPE", g.Key()} }),
		// A set that grows past 128 members (or meets a long one), when
		// Redis converts it to a skiplist: -0 is then kept, and ZSCAN
		// prints integral scores as %.17g does.
		one(func() []string {
			args := []string{"ZADD", "zenc{1}"}
			n := 3
			if g.Chance(6) {
				n = 40 + g.R.IntN(120)
			}
			for range n {
				args = append(args, g.Pick("-0", "0", "1e17", "123456789012345678", "-4611686018427387904", "1.5", g.Int(-5, 5)),
					"e"+strconv.Itoa(g.R.IntN(200)))
			}
			return args
		}),
		func() [][]string {
			m := "e" + strconv.Itoa(g.R.IntN(200))
			return [][]string{
				{"ZSCAN", "zenc{1}", "0", "MATCH", g.Pick("*", "e1*", "*0")},
				{"ZSCORE", "zenc{1}", m},
				{g.Pick("ZINCRBY", "ZADD"), "zenc{1}", g.Pick("-0", "0", "1"), m},
				{"ZRANGEBYSCORE", "zenc{1}", "-1", "1", "WITHSCORES"},
			}
		},
		one(func() []string {
			switch g.R.IntN(8) {
			case 0:
				return []string{"DEL", "zenc{1}"}
			case 1:
				return []string{"ZADD", "zenc{1}", "-0", strings.Repeat("L", 65+g.R.IntN(3))}
			}
			return []string{"ZREMRANGEBYRANK", "zenc{1}", "0", g.Int(0, 5)}
		}),
		// A big sliding log: new members at the top, the oldest cut from
		// the bottom, and now and then any other write or read in the
		// middle of it.
		func() [][]string {
			k := g.Pick("zbig{1}", "zbig{2}")
			var script [][]string
			if !bigSeeded[k] || g.Chance(40) {
				bigSeeded[k] = true
				seed := []string{"ZADD", k}
				for i := range bigWindow {
					at := strconv.FormatInt(bigClock-bigWindow+int64(i), 10)
					seed = append(seed, at, "seed-"+at)
				}
				script = append(script, seed)
			}
			for range 1 + g.R.IntN(3) {
				bigClock++
				at := strconv.FormatInt(bigClock, 10)
				script = append(script, []string{"ZADD", k, at, "e-" + at + "-" + strconv.Itoa(g.R.IntN(100))})
			}
			cutoff := strconv.FormatInt(bigClock-bigWindow, 10)
			script = append(script, []string{"ZREMRANGEBYSCORE", k, "-inf", g.Pick(cutoff, "("+cutoff)}, []string{"ZCARD", k})
			mid := strconv.FormatInt(bigClock-int64(g.R.IntN(bigWindow)), 10)
			switch g.R.IntN(12) {
			case 0:
				script = append(script, []string{"ZADD", k, mid, "mid-" + mid})
			case 1:
				script = append(script, []string{"ZREM", k, "seed-" + mid, "e-" + mid + "-1"})
			case 2:
				script = append(script, []string{"ZINCRBY", k, "1", "mid-" + mid})
			case 3:
				script = append(script, []string{"ZPOPMIN", k, g.Pick("1", "3")})
			case 4:
				script = append(script, []string{"ZRANGE", k, "0", "4", "WITHSCORES"})
			case 5:
				script = append(script, []string{"ZRANGEBYSCORE", k, mid, "+inf", "LIMIT", "0", "3"})
			case 6:
				script = append(script, []string{"ZSCORE", k, "mid-" + mid})
			case 7:
				script = append(script, []string{"ZRANK", k, "mid-" + mid})
			case 8:
				script = append(script, []string{"ZREMRANGEBYRANK", k, "0", g.Pick("0", "2")})
			case 9:
				script = append(script, []string{"ZADD", k, "NX", mid, "mid-" + mid})
			case 10:
				script = append(script, []string{"ZREMRANGEBYSCORE", k, mid, "(" + mid})
			}
			if g.Chance(3) {
				script = append(append([][]string{{"MULTI"}}, script...), []string{"EXEC"})
			}
			return script
		},
		// The sliding log: drop what left the window, count, log this
		// request, keep the key alive.
		func() [][]string {
			k := g.Pick("zlog{1}", "zlog{2}")
			if g.Chance(8) {
				k = g.Key()
			}
			clock += int64(1 + g.R.IntN(400))
			now := strconv.FormatInt(clock, 10)
			cutoff := strconv.FormatInt(clock-1000, 10)
			script := [][]string{
				{"ZREMRANGEBYSCORE", k, "-inf", g.Pick(cutoff, "("+cutoff)},
				{"ZCARD", k},
				{"ZADD", k, now, now + "-" + strconv.Itoa(g.R.IntN(1000))},
				{"EXPIRE", k, "1500"},
			}
			// As the recipes write it: inside MULTI, most of the time.
			if !g.Chance(4) {
				script = append(append([][]string{{"MULTI"}}, script...), []string{"EXEC"})
			}
			return script
		},
	}
}

// zPickArgs is one of the argument lists.
func (g *Gen) zPickArgs(xs ...[]string) []string { return xs[g.R.IntN(len(xs))] }
