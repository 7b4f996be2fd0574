package server

import "github.com/sluicehq/sluice/engine"

// hashCommands are the hash commands. Arity, flags, key positions and
// categories are Redis 7.0's; the engine ops parse the arguments.
func hashCommands() []*command {
	const (
		write = flagWrite | flagDenyOOM | flagFast
		read  = flagReadonly | flagFast
	)
	fieldValues := []argSpec{key("key"), many(str("field value"))}
	return []*command{
		{name: "hset", arity: -4, flags: write, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permWrite, group: "hash", since: "2.0.0",
			summary: "Set fields of a hash; replies how many are new.", args: fieldValues, op: engine.OpHSet, parse: parseKeyArgs},
		{name: "hsetnx", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permWrite, group: "hash", since: "2.0.0",
			summary: "Set a field of a hash only if it is not there yet.", args: []argSpec{key("key"), str("field"), str("value")}, op: engine.OpHSetNX, parse: parseKeyArgs},
		{name: "hmset", arity: -4, flags: write, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permWrite, group: "hash", since: "2.0.0",
			summary: "Set fields of a hash (deprecated: HSET does the same).", args: fieldValues, op: engine.OpHMSet, parse: parseKeyArgs},
		{name: "hget", arity: 3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.0.0",
			summary: "Get the value of a hash field.", args: []argSpec{key("key"), str("field")}, op: engine.OpHGet, parse: parseKeyArgs},
		{name: "hmget", arity: -3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.0.0",
			summary: "Get the values of hash fields.", args: []argSpec{key("key"), many(str("field"))}, op: engine.OpHMGet, parse: parseKeyArgs},
		{name: "hgetall", arity: 2, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.0.0",
			summary: "Get every field and value of a hash.", args: []argSpec{key("key")}, op: engine.OpHGetAll, parse: parseKeyArgs},
		{name: "hdel", arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permWrite, group: "hash", since: "2.0.0",
			summary: "Delete hash fields; replies how many were there.", args: []argSpec{key("key"), many(str("field"))}, op: engine.OpHDel, parse: parseKeyArgs},
		{name: "hexists", arity: 3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catHash, group: "hash", since: "2.0.0",
			summary: "Whether a hash field exists.", args: []argSpec{key("key"), str("field")}, op: engine.OpHExists, parse: parseKeyArgs},
		{name: "hlen", arity: 2, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catHash, group: "hash", since: "2.0.0",
			summary: "The number of fields in a hash.", args: []argSpec{key("key")}, op: engine.OpHLen, parse: parseKeyArgs},
		{name: "hkeys", arity: 2, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.0.0",
			summary: "Get every field of a hash.", args: []argSpec{key("key")}, op: engine.OpHKeys, parse: parseKeyArgs},
		{name: "hvals", arity: 2, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.0.0",
			summary: "Get every value of a hash.", args: []argSpec{key("key")}, op: engine.OpHVals, parse: parseKeyArgs},
		{name: "hstrlen", arity: 3, flags: read, firstKey: 1, lastKey: 1, step: 1, cats: catHash, group: "hash", since: "3.2.0",
			summary: "The length of a hash field's value.", args: []argSpec{key("key"), str("field")}, op: engine.OpHStrLen, parse: parseKeyArgs},
		{name: "hincrby", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permAll, group: "hash", since: "2.0.0",
			summary: "Increment the integer value of a hash field.", args: []argSpec{key("key"), str("field"), integer("increment")}, op: engine.OpHIncrBy, parse: parseKeyArgs},
		{name: "hincrbyfloat", arity: 4, flags: write, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permAll, group: "hash", since: "2.6.0",
			summary: "Increment the float value of a hash field.", args: []argSpec{key("key"), str("field"), {name: "increment", typ: "double"}}, op: engine.OpHIncrByFloat, parse: parseKeyArgs},
		{name: "hscan", arity: -3, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, cats: catHash, keyPerm: permRead, group: "hash", since: "2.8.0",
			summary: "Iterate the fields and values of a hash.", args: hashSetScanArgs, op: engine.OpHScan, parse: parseKeyArgs},
	}
}

// hashSetScanArgs are HSCAN's and SSCAN's arguments.
var hashSetScanArgs = []argSpec{key("key"), integer("cursor"), opt(argSpec{name: "MATCH pattern", typ: "pattern"}), opt(integer("COUNT count"))}
