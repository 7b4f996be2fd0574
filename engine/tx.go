package engine

// txOps are the transaction ops (to come).
func txOps() map[Op]OpSpec { return nil }
