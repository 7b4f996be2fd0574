package difftest

import "strconv"

// Strings, keys and expiry: the commands every family's keys meet.
func init() {
	Register(Family{Name: "strings", Gens: stringGens})
}

// longTTL is an expiry long enough that no key reaches it during a run, in
// whole seconds so that TTL agrees on both servers.
func (g *Gen) longTTL() string { return strconv.Itoa(1000 + g.R.IntN(1000)) }

// unixAt is an absolute expiry in seconds well in the future.
func (g *Gen) unixAt() string { return strconv.Itoa(4_000_000_000 + g.R.IntN(1000)) }

func (g *Gen) setExpiry() []string {
	switch g.R.IntN(8) {
	case 0:
		return []string{"EX", g.longTTL()}
	case 1:
		return []string{"PX", g.longTTL() + "000"}
	case 2:
		return []string{"KEEPTTL"}
	case 3:
		return []string{"EX", g.Pick("0", "-1", "x")}
	case 4:
		return []string{"EXAT", g.unixAt()}
	}
	return nil
}

func stringGens(g *Gen) []func() [][]string {
	one := func(f func() []string) func() [][]string {
		return func() [][]string { return [][]string{f()} }
	}
	return []func() [][]string{
		one(func() []string {
			args := append([]string{"SET", g.Key(), g.Value()}, g.setExpiry()...)
			switch g.R.IntN(6) {
			case 0:
				args = append(args, "NX")
			case 1:
				args = append(args, "XX")
			case 2:
				args = append(args, "GET")
			case 3:
				args = append(args, g.Pick("NX", "BAD"), "XX")
			}
			return args
		}),
		one(func() []string { return []string{"GET", g.Key()} }),
		one(func() []string { return []string{"MGET", g.Key(), g.Key(), g.Key()} }),
		one(func() []string { return []string{g.Pick("INCR", "DECR"), g.Key()} }),
		one(func() []string {
			return []string{g.Pick("INCRBY", "DECRBY"), g.Key(), g.Pick(g.Int(-100, 100), "0", "x", "-9223372036854775808", "9223372036854775807")}
		}),
		one(func() []string {
			return []string{"INCRBYFLOAT", g.Key(), g.Pick(g.Float(), "0.1", "-0.3", "1e300", "5.0e3", "1e400")}
		}),
		one(func() []string { return []string{"SETNX", g.Key(), g.Value()} }),
		one(func() []string {
			return []string{g.Pick("SETEX", "PSETEX"), g.Key(), g.Pick(g.longTTL()+"000", "0", "-5", "x"), g.Value()}
		}),
		one(func() []string { return []string{"GETSET", g.Key(), g.Value()} }),
		one(func() []string { return []string{"GETDEL", g.Key()} }),
		one(func() []string {
			args := []string{"GETEX", g.Key()}
			switch g.R.IntN(6) {
			case 0:
				args = append(args, "EX", g.longTTL())
			case 1:
				args = append(args, "PX", g.longTTL()+"000")
			case 2:
				args = append(args, "EXAT", g.unixAt())
			case 3:
				args = append(args, "PERSIST")
			case 4:
				args = append(args, g.Pick("EX", "PERSIST"), g.Pick("0", "x", "PX"))
			}
			return args
		}),
		one(func() []string {
			args := []string{g.Pick("MSET", "MSET", "MSETNX")}
			for range 1 + g.R.IntN(3) {
				args = append(args, g.Key(), g.Value())
			}
			if g.Chance(8) {
				args = append(args, g.Key())
			}
			return args
		}),
		one(func() []string { return []string{"STRLEN", g.Key()} }),
		one(func() []string { return []string{"APPEND", g.Key(), g.Value()} }),
		one(func() []string {
			index := func() string {
				return g.Pick(g.Int(-12, 12), g.Int(-12, 12), "0", "-1", "100", "-100", "x", "9223372036854775807", "-9223372036854775808")
			}
			return []string{g.Pick("GETRANGE", "GETRANGE", "SUBSTR"), g.Key(), index(), index()}
		}),
		one(func() []string {
			// Offsets stay small: past Sluice's 1 MiB record the two
			// servers' limits differ (docs/datatypes.md).
			return []string{"SETRANGE", g.Key(), g.Pick(g.Int(0, 12), g.Int(0, 40), "-1", "x", "536870912"), g.Pick(g.Value(), "", "ab")}
		}),
		one(func() []string { return []string{g.Pick("RENAME", "RENAMENX"), g.Key(), g.Key()} }),
		one(func() []string { return []string{"DEL", g.Key(), g.Key()} }),
		one(func() []string { return []string{"UNLINK", g.Key()} }),
		one(func() []string { return []string{"EXISTS", g.Key(), g.Key(), g.Key()} }),
		one(func() []string { return []string{"TOUCH", g.Key(), g.Key()} }),
		one(func() []string { return []string{"TYPE", g.Key()} }),
		one(func() []string { return []string{"TTL", g.Key()} }),
		one(func() []string { return []string{g.Pick("EXPIRETIME", "PEXPIRETIME"), g.Key()} }),
		one(func() []string {
			var args []string
			switch g.R.IntN(4) {
			case 0:
				args = []string{"EXPIRE", g.Key(), g.longTTL()}
			case 1:
				args = []string{"PEXPIRE", g.Key(), g.longTTL() + "000"}
			case 2:
				args = []string{"EXPIREAT", g.Key(), g.unixAt()}
			default:
				args = []string{"PEXPIREAT", g.Key(), g.unixAt() + "000"}
			}
			if g.Chance(2) {
				args = append(args, g.Pick("NX", "XX", "GT", "LT", "nx", "BAD"))
			}
			if g.Chance(8) {
				args = append(args, g.Pick("NX", "XX", "GT", "LT"))
			}
			return args
		}),
		one(func() []string { return []string{"EXPIRE", g.Key(), g.Pick("-1", "0", "x", "99999999999999999")} }),
		// A key that expires for real: both servers drop it within a
		// millisecond, and the pause makes sure of it before the next
		// command.
		func() [][]string {
			return [][]string{{"PEXPIRE", g.Key(), "1"}, {Sleep, "3"}}
		},
		func() [][]string {
			return [][]string{{"SET", g.Key(), g.Value(), "PX", "1"}, {Sleep, "3"}}
		},
		one(func() []string { return []string{"PERSIST", g.Key()} }),
		one(func() []string {
			return []string{"KEYS", g.Pick("*", "?", "{t}*", "[ab]", "[a-c]", "[^a]*", "\\{t}*", "*[}]*", "[c-a]", "[", "*\\")}
		}),
		one(func() []string {
			args := []string{"SCAN", "0", "COUNT", g.Pick("2", "10", "1000")}
			if g.Chance(2) {
				args = append(args, "MATCH", g.Pick("*", "{t}*", "?"))
			}
			if g.Chance(2) {
				args = append(args, "TYPE", g.Pick("string", "hash", "list", "set", "zset"))
			}
			return args
		}),
		one(func() []string { return []string{"PING", g.Value()} }),
		one(func() []string { return []string{"ECHO", g.Value()} }),
		one(func() []string { return []string{"NOSUCH", g.Key()} }),
		one(func() []string { return []string{g.Pick("GET", "SET", "MSET", "GETEX", "RENAME")} }),
		one(func() []string {
			if g.Chance(30) {
				return []string{"FLUSHALL"}
			}
			return []string{"EXISTS", g.Key()}
		}),
	}
}
