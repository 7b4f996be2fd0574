package server

// zsetCommands are the zset commands (to come).
func zsetCommands() []*command { return nil }
