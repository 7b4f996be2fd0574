package difftest

import "strconv"

// Lists: pushes, pops, indexes, ranges, trims, LSET, LREM, LINSERT and
// LPOS, with their options, bad numbers, missing keys and wrong types, and
// the rate limiter's LPUSH + LTRIM + LINDEX.
func init() {
	Register(Family{Name: "list", Gens: listGens})
}

// listIndex is an index or range bound: mostly small (negative too), now
// and then huge or malformed.
func (g *Gen) listIndex() string {
	switch g.R.IntN(14) {
	case 0:
		return g.Pick("9223372036854775807", "-9223372036854775808", "1000", "-1000")
	case 1:
		return g.Pick("x", "", "1.5", "01", "-0", "+1", " 1", "9223372036854775808")
	}
	return g.Int(-8, 8)
}

// listCount is a count for LPOP, LREM and LPOS's options.
func (g *Gen) listCount() string {
	switch g.R.IntN(10) {
	case 0:
		return g.Pick("-1", "-5", "-9223372036854775808")
	case 1:
		return g.Pick("x", "", "1.0", "9223372036854775807", "99999999999999999999")
	case 2:
		return "0"
	}
	return g.Int(1, 6)
}

// listElems is one to four elements, or now and then a big batch that
// makes Redis convert the list to its big encoding.
func (g *Gen) listElems() []string {
	n := 1 + g.R.IntN(4)
	if g.Chance(40) {
		n = 150 + g.R.IntN(151)
	}
	return g.Many(n, func() []string { return []string{g.listMember()} })
}

// listMember is an element: half the time from a tiny pool, so that LPOS,
// LREM and LINSERT find what they look for.
func (g *Gen) listMember() string {
	if g.Chance(2) {
		return g.Pick("a", "b", "c", "1")
	}
	return g.Member()
}

func listGens(g *Gen) []func() [][]string {
	one := func(f func() []string) func() [][]string {
		return func() [][]string { return [][]string{f()} }
	}
	push := func() []string {
		return append([]string{g.Pick("LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"), g.Key()}, g.listElems()...)
	}
	return []func() [][]string{
		one(push),
		one(push),
		one(push),
		one(push),
		one(push),
		one(func() []string {
			args := []string{g.Pick("LPOP", "RPOP"), g.Key()}
			switch g.R.IntN(6) {
			case 0, 1, 2:
				args = append(args, g.listCount())
			case 3:
				if g.Chance(3) {
					args = append(args, g.listCount(), g.listCount())
				}
			}
			return args
		}),
		one(func() []string { return []string{"LLEN", g.Key()} }),
		one(func() []string { return []string{"LINDEX", g.Key(), g.listIndex()} }),
		one(func() []string { return []string{"LRANGE", g.Key(), g.listIndex(), g.listIndex()} }),
		one(func() []string { return []string{"LRANGE", g.Key(), "0", "-1"} }),
		one(func() []string { return []string{"LTRIM", g.Key(), g.listIndex(), g.listIndex()} }),
		one(func() []string {
			// The common trims: keep the newest n at either end, or all.
			n := strconv.Itoa(g.R.IntN(8))
			return g.listPick([]string{"LTRIM", g.Key(), "0", n}, []string{"LTRIM", g.Key(), "-" + n, "-1"}, []string{"LTRIM", g.Key(), "0", "-1"})
		}),
		one(func() []string { return []string{"LSET", g.Key(), g.listIndex(), g.listMember()} }),
		one(func() []string { return []string{"LREM", g.Key(), g.Pick(g.listCount(), g.Int(-3, 3)), g.listMember()} }),
		one(func() []string {
			where := g.Pick("BEFORE", "AFTER", "before", "After", "middle")
			return []string{"LINSERT", g.Key(), where, g.listMember(), g.listMember()}
		}),
		one(func() []string {
			args := []string{"LPOS", g.Key(), g.listMember()}
			for range g.R.IntN(4) {
				switch g.R.IntN(8) {
				case 0, 1:
					args = append(args, g.Pick("RANK", "rank"), g.Pick(g.Int(-4, 4), g.listIndex(), "-9223372036854775808"))
				case 2, 3:
					args = append(args, g.Pick("COUNT", "count"), g.listCount())
				case 4, 5:
					args = append(args, g.Pick("MAXLEN", "maxlen"), g.Pick(g.listCount(), g.Int(0, 10)))
				case 6:
					args = append(args, g.Pick("RANK", "COUNT", "MAXLEN"))
				default:
					args = append(args, g.Pick("BAD", "1"))
				}
			}
			return args
		}),
		// A list full of repeats, searched with valid options, then
		// thinned by LREM from either end.
		func() [][]string {
			k := g.Key()
			script := [][]string{append([]string{"RPUSH", k}, g.Many(8+g.R.IntN(20), func() []string { return []string{g.Pick("a", "b", "c")} })...)}
			for range 3 {
				args := []string{"LPOS", k, g.Pick("a", "b", "c")}
				if g.Chance(2) {
					args = append(args, "RANK", g.Pick(g.Int(-5, -1), g.Int(1, 5)))
				}
				if g.Chance(2) {
					args = append(args, "COUNT", g.Int(0, 4))
				}
				if g.Chance(2) {
					args = append(args, "MAXLEN", g.Int(0, 12))
				}
				script = append(script, args)
			}
			return append(script, []string{"LREM", k, g.Int(-4, 4), g.Pick("a", "b", "c")}, []string{"LRANGE", k, "0", "-1"})
		},
		// The rate limiter: push the newest event, keep the last n, read
		// the oldest kept.
		func() [][]string {
			k, n := g.Key(), g.R.IntN(6)
			return [][]string{
				{"LPUSH", k, g.listMember()},
				{"LTRIM", k, "0", strconv.Itoa(n)},
				{"LINDEX", k, g.Pick("-1", strconv.Itoa(n))},
			}
		},
		// The same with a long window: lists past the length at which
		// Sluice indexes them (the moving window of a large limit), read
		// anywhere.
		func() [][]string {
			k, n := g.Key(), 100+g.R.IntN(250)
			return [][]string{
				{"LPUSH", k, g.listMember(), g.listMember()},
				{"LTRIM", k, "0", strconv.Itoa(n)},
				{"LINDEX", k, g.Pick(strconv.Itoa(n-1), strconv.Itoa(n), g.Int(-n, n), "-1")},
				{"LLEN", k},
			}
		},
		// Arity errors that arity itself catches.
		one(func() []string {
			return g.listPick([]string{g.Pick("LPUSH", "RPUSH", "LPUSHX", "RPUSHX"), g.Key()},
				[]string{g.Pick("LINDEX", "LLEN", "LPOP", "LRANGE", "LTRIM"), g.Key(), "0", "1", "2"},
				[]string{g.Pick("LSET", "LREM", "LINSERT", "LPOS"), g.Key()})
		}),
		// Other types on the shared keys, and expiry of lists.
		one(func() []string {
			if g.Chance(3) {
				return []string{"SET", g.Key(), g.Value()}
			}
			return []string{"DEL", g.Key()}
		}),
		one(func() []string { return []string{g.Pick("TYPE", "TTL"), g.Key()} }),
		one(func() []string { return []string{"EXPIRE", g.Key(), g.longTTL()} }),
		func() [][]string {
			k := g.Key()
			return [][]string{{"RPUSH", k, g.Member()}, {"PEXPIRE", k, "1"}, {Sleep, "3"}}
		},
	}
}

// listPick is one of three argument lists.
func (g *Gen) listPick(a, b, c []string) []string {
	switch g.R.IntN(3) {
	case 0:
		return a
	case 1:
		return b
	}
	return c
}
