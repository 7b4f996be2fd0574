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
	"sinter": true, "sunion": true, "sdiff": true,
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

// watchedChange watches a key another client then changes, and maybe
// opens a transaction: what a discarding command must forget.
func (g *Gen) watchedChange() [][]string {
	k := g.Key()
	script := [][]string{{"WATCH", k}, {Other, "SET", k, g.Value()}}
	if g.Chance(2) {
		script = append(script, []string{"MULTI"})
		script = append(script, g.txBody(g.R.IntN(3))...)
	}
	return script
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
		// EXEC refused (its arity), in a transaction or not, discards it
		// and forgets the watched keys; RESET ends both too.
		func() [][]string {
			script := append(g.watchedChange(), []string{"EXEC", g.Key()}, []string{"MULTI"}, g.bodyCommand())
			return append(script, []string{g.Pick("EXEC", "EXEC", "DISCARD")})
		},
		func() [][]string {
			script := append(g.watchedChange(), []string{"RESET"}, []string{"EXEC"}, []string{"MULTI"}, g.bodyCommand())
			return append(script, []string{"EXEC"})
		},
		// CLIENT REPLY: no replies while OFF, none for the command after
		// SKIP; the commands still run (later reads show their effects).
		func() [][]string {
			var script [][]string
			silent := func(n int) {
				for range n {
					script = append(script, append([]string{Unanswered}, g.bodyCommand()...))
				}
			}
			switch g.R.IntN(5) {
			case 0:
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "OFF"})
				silent(g.R.IntN(4))
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "SKIP"})
				silent(g.R.IntN(2))
				script = append(script, []string{"CLIENT", "REPLY", "ON"})
			case 1:
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "SKIP"})
				silent(1)
			case 2:
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "SKIP"}, []string{Unanswered, "CLIENT", "REPLY", "SKIP"})
				silent(1)
			case 3:
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "SKIP"}, []string{"CLIENT", "REPLY", "ON"})
			case 4:
				script = append(script, []string{Unanswered, "CLIENT", "REPLY", "OFF"}, []string{Unanswered, "MULTI"})
				script = append(script, append([]string{Unanswered}, g.bodyCommand()...), []string{Unanswered, "EXEC"})
				if g.Chance(2) {
					script = append(script, []string{"RESET"})
				} else {
					script = append(script, []string{Unanswered, "CLIENT", "REPLY", "BAD"}, []string{"CLIENT", "REPLY", "ON"})
				}
			}
			return append(script, g.bodyCommand())
		},
	}
}
