package engine

// hashOps are the hash ops (to come).
func hashOps() map[Op]OpSpec { return nil }
