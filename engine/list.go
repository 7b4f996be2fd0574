package engine

// listOps are the list ops (to come).
func listOps() map[Op]OpSpec { return nil }
