package server

import "github.com/sluicehq/sluice/engine"

// listCommands are the list commands, with Redis 7.0's arity, flags, key
// positions and ACL categories.
func listCommands() []*command {
	const w, r = flagWrite, flagReadonly
	elems := []argSpec{key("key"), many(str("element"))}
	rangeArgs := []argSpec{key("key"), integer("start"), integer("stop")}
	return []*command{
		{name: "lpush", arity: -3, flags: w | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "1.0.0",
			summary: "Prepend one or more elements to a list.", args: elems, op: engine.OpLPush, parse: parsePush(false, false)},
		{name: "rpush", arity: -3, flags: w | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "1.0.0",
			summary: "Append one or more elements to a list.", args: elems, op: engine.OpLPush, parse: parsePush(true, false)},
		{name: "lpushx", arity: -3, flags: w | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "2.2.0",
			summary: "Prepend elements to a list, only if the list exists.", args: elems, op: engine.OpLPush, parse: parsePush(false, true)},
		{name: "rpushx", arity: -3, flags: w | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "2.2.0",
			summary: "Append elements to a list, only if the list exists.", args: elems, op: engine.OpLPush, parse: parsePush(true, true)},
		{name: "lpop", arity: -2, flags: w | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permAll, group: "list", since: "1.0.0",
			summary: "Remove and get the first elements in a list.", args: []argSpec{key("key"), opt(integer("count"))}, op: engine.OpLPop, parse: parsePop(false)},
		{name: "rpop", arity: -2, flags: w | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permAll, group: "list", since: "1.0.0",
			summary: "Remove and get the last elements in a list.", args: []argSpec{key("key"), opt(integer("count"))}, op: engine.OpLPop, parse: parsePop(true)},
		{name: "llen", arity: 2, flags: r | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catList, group: "list", since: "1.0.0",
			summary: "Get the length of a list.", args: []argSpec{key("key")}, op: engine.OpLLen, parse: parseKeyArgs},
		{name: "lindex", arity: 3, flags: r, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permRead, group: "list", since: "1.0.0",
			summary: "Get an element from a list by its index.", args: []argSpec{key("key"), integer("index")}, op: engine.OpLIndex, parse: parseKeyArgs},
		{name: "lrange", arity: 4, flags: r, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permRead, group: "list", since: "1.0.0",
			summary: "Get a range of elements from a list.", args: rangeArgs, op: engine.OpLRange, parse: parseKeyArgs},
		{name: "ltrim", arity: 4, flags: w, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "1.0.0",
			summary: "Trim a list to the specified range.", args: rangeArgs, op: engine.OpLTrim, parse: parseKeyArgs},
		{name: "lset", arity: 4, flags: w | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "1.0.0",
			summary: "Set the value of an element in a list by its index.", args: []argSpec{key("key"), integer("index"), str("element")}, op: engine.OpLSet, parse: parseKeyArgs},
		{name: "lrem", arity: 4, flags: w, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "1.0.0",
			summary: "Remove elements from a list.", args: []argSpec{key("key"), integer("count"), str("element")}, op: engine.OpLRem, parse: parseKeyArgs},
		{name: "linsert", arity: 5, flags: w | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permWrite, group: "list", since: "2.2.0",
			summary: "Insert an element before or after another element in a list.",
			args:    []argSpec{key("key"), {name: "where", typ: "oneof", sub: []argSpec{{name: "BEFORE", typ: "pure-token"}, {name: "AFTER", typ: "pure-token"}}}, str("pivot"), str("element")}, op: engine.OpLInsert, parse: parseKeyArgs},
		{name: "lpos", arity: -3, flags: r, firstKey: 1, lastKey: 1, step: 1, cats: catList, keyPerm: permRead, group: "list", since: "6.0.6",
			summary: "Return the index of matching elements on a list.",
			args:    []argSpec{key("key"), str("element"), opt(integer("RANK rank")), opt(integer("COUNT num-matches")), opt(integer("MAXLEN len"))}, op: engine.OpLPos, parse: parseKeyArgs},
	}
}

// parsePush: LPUSH, RPUSH and the X forms share an op; N[0] says which
// end, N[1] whether the list must exist.
func parsePush(tail, exists bool) func(c *engine.Command, args [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		if tail {
			c.N[0] = 1
		}
		if exists {
			c.N[1] = 1
		}
		return parseKeyArgs(c, args)
	}
}

// parsePop: LPOP and RPOP share an op; N[0] says which end.
func parsePop(tail bool) func(c *engine.Command, args [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		if tail {
			c.N[0] = 1
		}
		return parseKeyArgs(c, args)
	}
}
