package difftest

import "strconv"

// Hashes: every hash command with valid and invalid arguments, over the
// shared key pool (so keys holding strings and sets meet them), now and
// then a hash big enough for Redis to convert it to a hash table.
func init() {
	Register(Family{Name: "hash", Gens: hashGens})
}

// hsScript makes a one-command script.
func hsScript(f func() []string) func() [][]string {
	return func() [][]string { return [][]string{f()} }
}

// hashValue is a field's value: often a number, so that HINCRBY and
// HINCRBYFLOAT find something to add to.
func (g *Gen) hashValue() string {
	switch g.R.IntN(6) {
	case 0:
		return g.Int(-100, 100)
	case 1:
		return g.Pick("1.5", "-0.25", "1e3", "9223372036854775807", "-9223372036854775808", "inf", "01", "0x10", "3.0000000000000001", " 1", "1 ", "")
	}
	return g.Value()
}

// hashPairs is n field/value pairs.
func (g *Gen) hashPairs(n int) []string {
	return g.Many(n, func() []string { return []string{g.Member(), g.hashValue()} })
}

// hashBigPairs is enough distinct pairs to make Redis use a hash table.
func (g *Gen) hashBigPairs() []string {
	n := 150 + g.R.IntN(151)
	out := make([]string, 0, 2*n)
	for i := range n {
		out = append(out, "f"+strconv.Itoa(i), g.hashValue())
	}
	return out
}

// hsScanCursor is a cursor: mostly 0, or a spelling of 0 that Redis's
// strtoul reads, or one it refuses. A nonzero valid cursor only makes
// sense on a small collection (see the scripts that build one first).
func (g *Gen) hsScanCursor() string {
	if g.Chance(4) {
		return g.Pick("", "00", "+0", "-0", "0\x00x", "x", " 0", "0 ", "-", "+", "1.5", "0x0", "18446744073709551616", "-18446744073709551616", "99999999999999999999999")
	}
	return "0"
}

// hsScanOptions are HSCAN/SSCAN options, now and then malformed.
func (g *Gen) hsScanOptions() []string {
	var out []string
	for range g.R.IntN(3) {
		switch g.R.IntN(8) {
		case 0, 1, 2:
			out = append(out, g.Pick("MATCH", "match"), g.Pick("*", "m*", "m1*", "*1", "m?", "-*", "", "f1*", "*\\*", "f??"))
		case 3, 4:
			out = append(out, g.Pick("COUNT", "count"), g.Pick("1", "2", "10", "1000"))
		case 5:
			out = append(out, "COUNT", g.Pick("0", "-1", "x", "1.5", "", "9223372036854775808"))
		case 6:
			out = append(out, g.Pick("TYPE", "NOVALUES", "BAD", "COUNT\x00x"), g.Pick("string", "1"))
		default:
			out = append(out, g.Pick("MATCH", "COUNT"))
		}
	}
	return out
}

// hsKeyGens are the scripts that put other things on a family's keys:
// strings (for WRONGTYPE), deletions, expiries that run out and long ones
// that must survive.
func hsKeyGens(g *Gen) []func() [][]string {
	return []func() [][]string{
		hsScript(func() []string { return []string{"SET", g.Key(), g.Value()} }),
		hsScript(func() []string { return []string{"DEL", g.Key()} }),
		hsScript(func() []string { return []string{"TYPE", g.Key()} }),
		hsScript(func() []string { return []string{"EXPIRE", g.Key(), g.longTTL()} }),
		func() [][]string { return [][]string{{"PEXPIRE", g.Key(), "1"}, {Sleep, "3"}} },
	}
}

func hashGens(g *Gen) []func() [][]string {
	return append(hsKeyGens(g),
		hsScript(func() []string {
			args := append([]string{g.Pick("HSET", "hset"), g.Key()}, g.hashPairs(1+g.R.IntN(4))...)
			if g.Chance(10) {
				args = append(args, g.Member()) // a field without its value
			}
			return args
		}),
		hsScript(func() []string { return append([]string{"HSET", g.Key()}, g.hashBigPairs()...) }),
		hsScript(func() []string { return []string{"HSET", g.Key(), g.Member()} }),
		hsScript(func() []string {
			args := append([]string{"HMSET", g.Key()}, g.hashPairs(1+g.R.IntN(3))...)
			if g.Chance(8) {
				args = append(args, g.Member())
			}
			return args
		}),
		hsScript(func() []string { return []string{"HSETNX", g.Key(), g.Member(), g.hashValue()} }),
		hsScript(func() []string { return []string{"HSETNX", g.Key(), g.Member()} }),
		hsScript(func() []string { return []string{"HGET", g.Key(), g.Member()} }),
		hsScript(func() []string { return []string{"HGET", g.Key()} }),
		hsScript(func() []string {
			return append([]string{"HMGET", g.Key()}, g.Many(1+g.R.IntN(4), func() []string { return []string{g.Member()} })...)
		}),
		hsScript(func() []string { return []string{g.Pick("HGETALL", "HKEYS", "HVALS", "HLEN"), g.Key()} }),
		hsScript(func() []string { return []string{g.Pick("HGETALL", "HLEN"), g.Key(), "extra"} }),
		hsScript(func() []string {
			return append([]string{"HDEL", g.Key()}, g.Many(1+g.R.IntN(3), func() []string { return []string{g.Member()} })...)
		}),
		hsScript(func() []string { return []string{"HDEL", g.Key()} }),
		hsScript(func() []string { return []string{g.Pick("HEXISTS", "HSTRLEN"), g.Key(), g.Member()} }),
		hsScript(func() []string {
			return []string{"HINCRBY", g.Key(), g.Member(), g.Pick(g.Int(-100, 100), "0", "x", "1.5", "", "+1", "-0", "01",
				"9223372036854775807", "-9223372036854775808", "9223372036854775808", "4611686018427387904")}
		}),
		hsScript(func() []string {
			return []string{"HINCRBYFLOAT", g.Key(), g.Member(), g.Pick(g.Float(), "0.1", "-0.3", "1e300", "5.0e3", "1e400", "1e5000", "-inf", "0x1p3", "1e-5000", "")}
		}),
		hsScript(func() []string { return []string{g.Pick("HINCRBY", "HINCRBYFLOAT"), g.Key(), g.Member()} }),
		hsScript(func() []string {
			return append([]string{"HSCAN", g.Key(), g.hsScanCursor()}, g.hsScanOptions()...)
		}),
		hsScript(func() []string { return []string{"HSCAN", g.Key()} }),
		// A nonzero cursor over a hash Redis keeps as a listpack: every
		// field comes back at once, with cursor 0, whatever the cursor.
		func() [][]string {
			k := g.Key()
			return [][]string{
				{"DEL", k},
				append([]string{"HSET", k}, g.Many(1+g.R.IntN(5), func() []string { return []string{"m" + g.Int(0, 20), g.Int(0, 99)} })...),
				append([]string{"HSCAN", k, g.Pick("7", "12345", "-1", "18446744073709551615")}, g.hsScanOptions()...),
			}
		},
	)
}
