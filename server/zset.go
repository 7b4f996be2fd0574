package server

import "github.com/sluicehq/sluice/engine"

// zsetCommands are the sorted-set commands. Arity, flags, key positions
// and ACL categories are Redis 7.0's; the engine op parses the arguments.
func zsetCommands() []*command {
	const (
		rw   = flagWrite | flagDenyOOM | flagFast
		wf   = flagWrite | flagFast
		rf   = flagReadonly | flagFast
		ro   = flagReadonly
		w    = flagWrite
		grp  = "sorted-set"
		cats = catSortedSet
	)
	score := func(name string) argSpec { return argSpec{name: name, typ: "double"} }
	withLimit := func(a ...argSpec) []argSpec {
		return append(append([]argSpec{}, a...), token("WITHSCORES"), opt(integer("LIMIT offset count")))
	}
	row := func(name string, arity int, flags cmdFlag, perm keyPerm, since, summary string, op engine.Op, args ...argSpec) *command {
		return &command{name: name, arity: arity, flags: flags, firstKey: 1, lastKey: 1, step: 1, cats: cats, keyPerm: perm,
			group: grp, since: since, summary: summary, args: args, op: op, parse: parseKeyArgs}
	}
	return []*command{
		row("zadd", -4, rw, permWrite, "1.2.0", "Add one or more members to a sorted set, or update its score if it already exists", engine.OpZAdd,
			key("key"), token("NX"), token("XX"), token("GT"), token("LT"), token("CH"), token("INCR"), many(str("score member"))),
		row("zincrby", 4, rw, permAll, "1.2.0", "Increment the score of a member in a sorted set", engine.OpZIncrBy,
			key("key"), score("increment"), str("member")),
		row("zrem", -3, wf, permWrite, "1.2.0", "Remove one or more members from a sorted set", engine.OpZRem,
			key("key"), many(str("member"))),
		row("zcard", 2, rf, 0, "1.2.0", "Get the number of members in a sorted set", engine.OpZCard, key("key")),
		row("zcount", 4, rf, permRead, "2.0.0", "Count the members in a sorted set with scores within the given values", engine.OpZCount,
			key("key"), score("min"), score("max")),
		row("zlexcount", 4, rf, permRead, "2.8.9", "Count the number of members in a sorted set between a given lexicographical range", engine.OpZLexCount,
			key("key"), str("min"), str("max")),
		row("zscore", 3, rf, permRead, "1.2.0", "Get the score associated with the given member in a sorted set", engine.OpZScore,
			key("key"), str("member")),
		row("zmscore", -3, rf, permRead, "6.2.0", "Get the score associated with the given members in a sorted set", engine.OpZMScore,
			key("key"), many(str("member"))),
		row("zrank", 3, rf, permRead, "2.0.0", "Determine the index of a member in a sorted set", engine.OpZRank,
			key("key"), str("member")),
		row("zrevrank", 3, rf, permRead, "2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low", engine.OpZRevRank,
			key("key"), str("member")),
		row("zrange", -4, ro, permRead, "1.2.0", "Return a range of members in a sorted set", engine.OpZRange,
			key("key"), str("start"), str("stop"), token("BYSCORE"), token("BYLEX"), token("REV"), opt(integer("LIMIT offset count")), token("WITHSCORES")),
		row("zrangebyscore", -4, ro, permRead, "1.0.5", "Return a range of members in a sorted set, by score", engine.OpZRangeByScore,
			withLimit(key("key"), score("min"), score("max"))...),
		row("zrevrangebyscore", -4, ro, permRead, "2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low", engine.OpZRevRangeByScore,
			withLimit(key("key"), score("max"), score("min"))...),
		row("zrevrange", -4, ro, permRead, "1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low", engine.OpZRevRange,
			key("key"), integer("start"), integer("stop"), token("WITHSCORES")),
		row("zrangebylex", -4, ro, permRead, "2.8.9", "Return a range of members in a sorted set, by lexicographical range", engine.OpZRangeByLex,
			key("key"), str("min"), str("max"), opt(integer("LIMIT offset count"))),
		row("zrevrangebylex", -4, ro, permRead, "2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", engine.OpZRevRangeByLex,
			key("key"), str("max"), str("min"), opt(integer("LIMIT offset count"))),
		row("zremrangebyscore", 4, w, permWrite, "1.2.0", "Remove all members in a sorted set within the given scores", engine.OpZRemRangeByScore,
			key("key"), score("min"), score("max")),
		row("zremrangebyrank", 4, w, permWrite, "2.0.0", "Remove all members in a sorted set within the given indexes", engine.OpZRemRangeByRank,
			key("key"), integer("start"), integer("stop")),
		row("zremrangebylex", 4, w, permWrite, "2.8.9", "Remove all members in a sorted set between the given lexicographical range", engine.OpZRemRangeByLex,
			key("key"), str("min"), str("max")),
		row("zpopmin", -2, wf, permAll, "5.0.0", "Remove and return members with the lowest scores in a sorted set", engine.OpZPopMin,
			key("key"), opt(integer("count"))),
		row("zpopmax", -2, wf, permAll, "5.0.0", "Remove and return members with the highest scores in a sorted set", engine.OpZPopMax,
			key("key"), opt(integer("count"))),
		row("zscan", -3, ro, permRead, "2.8.0", "Incrementally iterate sorted sets elements and associated scores", engine.OpZScan,
			key("key"), integer("cursor"), opt(argSpec{name: "MATCH pattern", typ: "pattern"}), opt(integer("COUNT count"))),
	}
}
