package server

import (
	"errors"

	"github.com/sluicehq/sluice/engine"
)

// setCommands are the set commands. Arity, flags, key positions and
// categories are Redis 7.0's; the engine ops parse the arguments.
func setCommands() []*command {
	read := flagReadonly | flagFast
	return []*command{
		{name: "sadd", arity: -3, flags: flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catSet, keyPerm: permWrite, group: "set", since: "1.0.0",
			summary: "Add members to a set; replies how many are new.", args: []argSpec{key("key"), many(str("member"))}, op: engine.OpSAdd, parse: parseKeyArgs},
		{name: "srem", arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catSet, keyPerm: permWrite, group: "set", since: "1.0.0",
			summary: "Remove members from a set; replies how many were there.", args: []argSpec{key("key"), many(str("member"))}, op: engine.OpSRem, parse: parseKeyArgs},
		{name: "scard", arity: 2, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catSet, group: "set", since: "1.0.0",
			summary: "The number of members in a set.", args: []argSpec{key("key")}, op: engine.OpSCard, parse: parseKeyArgs},
		{name: "sismember", arity: 3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catSet, group: "set", since: "1.0.0",
			summary: "Whether a member is in a set.", args: []argSpec{key("key"), str("member")}, op: engine.OpSIsMember, parse: parseKeyArgs},
		{name: "smismember", arity: -3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "6.2.0",
			summary: "Whether each member is in a set.", args: []argSpec{key("key"), many(str("member"))}, op: engine.OpSMIsMember, parse: parseKeyArgs},
		{name: "smembers", arity: 2, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "1.0.0",
			summary: "Every member of a set.", args: []argSpec{key("key")}, op: engine.OpSMembers, parse: parseKeyArgs},
		{name: "sscan", arity: -3, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "2.8.0",
			summary: "Iterate the members of a set.", args: hashSetScanArgs, op: engine.OpSScan, parse: parseKeyArgs},
		{name: "sinter", arity: -2, flags: flagReadonly, firstKey: 1, lastKey: -1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "1.0.0",
			summary: "The members every set has.", args: []argSpec{many(key("key"))}, op: engine.OpSetAlgebra, parse: parseSetAlgebra(engine.SetInter)},
		{name: "sunion", arity: -2, flags: flagReadonly, firstKey: 1, lastKey: -1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "1.0.0",
			summary: "The members any of the sets has.", args: []argSpec{many(key("key"))}, op: engine.OpSetAlgebra, parse: parseSetAlgebra(engine.SetUnion)},
		{name: "sdiff", arity: -2, flags: flagReadonly, firstKey: 1, lastKey: -1, step: 1, cats: catSet, keyPerm: permRead, group: "set", since: "1.0.0",
			summary: "The members of the first set that none of the others has.", args: []argSpec{many(key("key"))}, op: engine.OpSetAlgebra, parse: parseSetAlgebra(engine.SetDiff)},
		{name: "sintercard", arity: -3, flags: flagReadonly, findKeys: numKeysAt1, cats: catSet, keyPerm: permRead, group: "set", since: "7.0.0",
			summary: "How many members every set has, counting up to LIMIT.", args: []argSpec{integer("numkeys"), many(key("key")), opt(integer("LIMIT limit"))},
			op: engine.OpSetAlgebra, parse: parseSInterCard},
		{name: "sinterstore", arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 1, findKeys: storeKeys, cats: catSet, group: "set", since: "1.0.0",
			summary: "Store SINTER's result at destination; reply its size.", args: []argSpec{key("destination"), many(key("key"))}, op: engine.OpSetAlgebraStore, parse: parseSetAlgebra(engine.SetInter)},
		{name: "sunionstore", arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 1, findKeys: storeKeys, cats: catSet, group: "set", since: "1.0.0",
			summary: "Store SUNION's result at destination; reply its size.", args: []argSpec{key("destination"), many(key("key"))}, op: engine.OpSetAlgebraStore, parse: parseSetAlgebra(engine.SetUnion)},
		{name: "sdiffstore", arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 1, findKeys: storeKeys, cats: catSet, group: "set", since: "1.0.0",
			summary: "Store SDIFF's result at destination; reply its size.", args: []argSpec{key("destination"), many(key("key"))}, op: engine.OpSetAlgebraStore, parse: parseSetAlgebra(engine.SetDiff)},
		{name: "smove", arity: 4, flags: flagWrite | flagFast, firstKey: 1, lastKey: 2, step: 1, cats: catSet, keyPerm: permAll, group: "set", since: "1.0.0",
			summary: "Move a member from one set to another; 1 if it was moved.", args: []argSpec{key("source"), key("destination"), str("member")},
			op: engine.OpSMove, parse: parseSMove},
	}
}

// parseSetAlgebra: SINTER|SUNION|SDIFF key [key ...], and their STORE
// forms, whose first key is the destination: every key a sub-command of
// the op, for the hold.
func parseSetAlgebra(mode int64) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.N[0] = mode
		for _, k := range args[1:] {
			c.Sub = append(c.Sub, engine.Command{Op: c.Op, Key: k})
		}
		return nil
	}
}

var (
	errNumKeysZero    = errors.New("numkeys should be greater than 0")
	errNumKeysMany    = errors.New("Number of keys can't be greater than number of args")
	errLimitNegative  = errors.New("LIMIT can't be negative")
	errSInterCardArgs = errSyntax
)

// parseSInterCard: SINTERCARD numkeys key [key ...] [LIMIT limit], with
// Redis 7.0's errors in its order.
func parseSInterCard(c *engine.Command, args [][]byte) error {
	n, err := engine.ParseInt64(args[1])
	if err != nil || n < 1 {
		return errNumKeysZero
	}
	if n > int64(len(args)-2) {
		return errNumKeysMany
	}
	c.N[0], c.N[1] = engine.SetInter, 1
	for i := 2 + int(n); i < len(args); i++ {
		if !isWord(args[i], "limit") || i+1 >= len(args) {
			return errSInterCardArgs
		}
		limit, err := engine.ParseInt64(args[i+1])
		if err != nil || limit < 0 {
			return errLimitNegative
		}
		c.N[2] = limit
		i++
	}
	for _, k := range args[2 : 2+n] {
		c.Sub = append(c.Sub, engine.Command{Op: c.Op, Key: k})
	}
	return nil
}

func parseSMove(c *engine.Command, args [][]byte) error {
	c.Value = args[3]
	c.Sub = append(c.Sub, engine.Command{Op: c.Op, Key: args[1]}, engine.Command{Op: c.Op, Key: args[2]})
	return nil
}

// numKeysAt1 finds the keys of a command whose numkeys is its first
// argument (SINTERCARD).
func numKeysAt1(args [][]byte, buf []keyRef) []keyRef {
	n, err := engine.ParseInt64(args[1])
	if err != nil || n < 1 || n > int64(len(args)-2) {
		return buf
	}
	for i := 2; i < 2+int(n); i++ {
		buf = append(buf, keyRef{at: i, need: permRead})
	}
	return buf
}

// storeKeys: a STORE command writes its first key and reads the rest.
func storeKeys(args [][]byte, buf []keyRef) []keyRef {
	buf = append(buf, keyRef{at: 1, need: permWrite})
	for i := 2; i < len(args); i++ {
		buf = append(buf, keyRef{at: i, need: permRead})
	}
	return buf
}
