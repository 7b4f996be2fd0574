package engine

// zsetOps are the zset ops (to come).
func zsetOps() map[Op]OpSpec { return nil }
