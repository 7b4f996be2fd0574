package server

import "github.com/sluicehq/sluice/engine"

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
	}
}
