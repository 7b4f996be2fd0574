package server

// txCommands are MULTI, EXEC, DISCARD, WATCH and UNWATCH (to come).
func txCommands() []*command { return nil }
