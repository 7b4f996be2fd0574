package engine

// setOps are the set ops (to come).
func setOps() map[Op]OpSpec { return nil }
