package difftest

import (
	"strconv"
	"strings"
)

// Transactions: MULTI bodies drawn from the other families' commands,
// EXECABORT after a queue-time error, runtime errors inside EXEC, WATCH
// with another client changing (or not) the watched keys, and the misuse
// errors.
func init() {
	Register(Family{Name: "tx", Gens: txGens})
}

// inTxUnordered are replies whose order is Redis's hash-table order: the
// harness cannot put them in order inside an EXEC reply, so bodies skip
// them.
var inTxUnordered = map[string]bool{
	"keys": true, "scan": true, "hscan": true, "sscan": true, "zscan": true, "smembers": true,
	"hgetall": true, "hkeys": true, "hvals": true, "dbsize": true,
}

// bodyCommand is one command from another family, fit for a transaction.
func (g *Gen) bodyCommand() []string {
	for {
		script := g.bodies[g.R.IntN(len(g.bodies))]()
		if len(script) != 1 || strings.HasPrefix(script[0][0], "@") || inTxUnordered[strings.ToLower(script[0][0])] {
			continue
		}
		return script[0]
	}
}

func (g *Gen) txBody(n int) [][]string {
	var out [][]string
	for range n {
		out = append(out, g.bodyCommand())
	}
	return out
}

func txGens(g *Gen) []func() [][]string {
	return []func() [][]string{
		func() [][]string {
			script := append([][]string{{"MULTI"}}, g.txBody(1+g.R.IntN(6))...)
			return append(script, []string{g.Pick("EXEC", "EXEC", "EXEC", "DISCARD")})
		},
		// A queue-time error dooms the EXEC.
		func() [][]string {
			script := append([][]string{{"MULTI"}}, g.txBody(g.R.IntN(3))...)
			script = append(script, [][]string{{"NOSUCH", g.Key()}, {"GET"}, {"CONFIG", "NOSUCH"}}[g.R.IntN(3)])
			script = append(script, g.txBody(g.R.IntN(3))...)
			return append(script, []string{"EXEC"})
		},
		// Errors that do not doom it.
		func() [][]string {
			script := [][]string{{"MULTI"}, g.bodyCommand(), {g.Pick("MULTI", "WATCH"), g.Key()}, g.bodyCommand()}
			if script[2][0] == "MULTI" {
				script[2] = []string{"MULTI"}
			}
			return append(script, []string{"EXEC"})
		},
		// WATCH, maybe another client's change, then a transaction.
		func() [][]string {
			k := g.Key()
			script := [][]string{{"WATCH", k, g.Key()}}
			switch g.R.IntN(4) {
			case 0:
				v := g.Value()
				if g.FingerprintWatch {
					g.unique++
					v = "changed-" + strconv.Itoa(g.unique)
				}
				script = append(script, []string{Other, "SET", k, v})
			case 1:
				script = append(script, []string{Other, "DEL", k})
			case 2:
				script = append(script, []string{Other, "SET", g.Key() + "other", "x"})
			}
			if g.Chance(6) {
				script = append(script, []string{"UNWATCH"})
			}
			script = append(script, []string{"MULTI"})
			script = append(script, g.txBody(1+g.R.IntN(3))...)
			return append(script, []string{"EXEC"})
		},
		// The connection's own change to a watched key also aborts.
		func() [][]string {
			k := g.Key()
			return [][]string{{"WATCH", k}, {"INCR", k}, {"MULTI"}, {"GET", k}, {"EXEC"}}
		},
		func() [][]string { return [][]string{{g.Pick("EXEC", "DISCARD", "UNWATCH")}} },
	}
}
