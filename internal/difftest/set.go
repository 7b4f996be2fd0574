package difftest

import "strconv"

// Sets: every set command with valid and invalid arguments, over the
// shared key pool, now and then a big set (of integers, past Redis's
// intset limit, or of strings).
func init() {
	Register(Family{Name: "set", Gens: setGens})
}

func (g *Gen) setMembers(n int) []string {
	return g.Many(n, func() []string { return []string{g.Member()} })
}

func (g *Gen) setBigMembers() []string {
	n := 150 + g.R.IntN(151)
	out := make([]string, 0, n)
	ints := g.Chance(2)
	for i := range n {
		if ints {
			out = append(out, strconv.Itoa(i*3-100))
		} else {
			out = append(out, "e"+strconv.Itoa(i))
		}
	}
	return out
}

func setGens(g *Gen) []func() [][]string {
	return append(hsKeyGens(g),
		hsScript(func() []string {
			return append([]string{g.Pick("SADD", "sadd"), g.Key()}, g.setMembers(1+g.R.IntN(4))...)
		}),
		hsScript(func() []string { return append([]string{"SADD", g.Key()}, g.setBigMembers()...) }),
		hsScript(func() []string {
			// Integers only: Redis keeps them in an intset.
			return append([]string{"SADD", g.Key()}, g.Many(1+g.R.IntN(4), func() []string { return []string{g.Int(-20, 20)} })...)
		}),
		hsScript(func() []string { return []string{"SADD", g.Key()} }),
		hsScript(func() []string { return append([]string{"SREM", g.Key()}, g.setMembers(1+g.R.IntN(3))...) }),
		hsScript(func() []string { return []string{"SREM", g.Key()} }),
		hsScript(func() []string { return []string{"SCARD", g.Key()} }),
		hsScript(func() []string { return []string{"SCARD", g.Key(), g.Member()} }),
		hsScript(func() []string { return []string{"SISMEMBER", g.Key(), g.Member()} }),
		hsScript(func() []string { return []string{"SISMEMBER", g.Key()} }),
		hsScript(func() []string { return append([]string{"SMISMEMBER", g.Key()}, g.setMembers(1+g.R.IntN(4))...) }),
		hsScript(func() []string { return []string{"SMISMEMBER", g.Key()} }),
		hsScript(func() []string { return []string{"SMEMBERS", g.Key()} }),
		hsScript(func() []string { return []string{"SMEMBERS", g.Key(), "extra"} }),
		hsScript(func() []string { return append([]string{"SSCAN", g.Key(), g.hsScanCursor()}, g.hsScanOptions()...) }),
		hsScript(func() []string { return []string{"SSCAN", g.Key()} }),
		// Set algebra, over keys that may be missing or of another type;
		// the STORE forms may store into one of their own sources.
		hsScript(func() []string {
			return append([]string{g.Pick("SINTER", "SUNION", "SDIFF")}, g.Many(1+g.R.IntN(3), func() []string { return []string{g.Key()} })...)
		}),
		hsScript(func() []string {
			return append([]string{g.Pick("SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"), g.Key()}, g.Many(1+g.R.IntN(3), func() []string { return []string{g.Key()} })...)
		}),
		hsScript(func() []string {
			n := 1 + g.R.IntN(3)
			args := append([]string{"SINTERCARD", g.Pick(strconv.Itoa(n), strconv.Itoa(n), "0", "x", "9")}, g.Many(n, func() []string { return []string{g.Key()} })...)
			if g.Chance(2) {
				args = append(args, g.Pick("LIMIT", "LIMIT", "BAD"), g.Pick("0", "1", "2", "-1", "x"))
			}
			return args
		}),
		hsScript(func() []string { return []string{"SMOVE", g.Key(), g.Key(), g.Member()} }),
		hsScript(func() []string { return []string{g.Pick("SINTER", "SMOVE", "SINTERSTORE", "SINTERCARD")} }),
		// A nonzero cursor over a set Redis keeps as an intset: every
		// member comes back at once, with cursor 0, whatever the cursor.
		func() [][]string {
			k := g.Key()
			return [][]string{
				{"DEL", k},
				append([]string{"SADD", k}, g.Many(1+g.R.IntN(5), func() []string { return []string{g.Int(-20, 20)} })...),
				append([]string{"SSCAN", k, g.Pick("7", "12345", "-1", "18446744073709551615")}, g.hsScanOptions()...),
			}
		},
	)
}
