package engine

// Placeholder families, replaced by their files as they land.

func stringOps() map[Op]OpSpec { return nil }
func hashOps() map[Op]OpSpec   { return nil }
func listOps() map[Op]OpSpec   { return nil }
func setOps() map[Op]OpSpec    { return nil }
func zsetOps() map[Op]OpSpec   { return nil }
func txOps() map[Op]OpSpec     { return nil }
