package server

// setCommands are the set commands (to come).
func setCommands() []*command { return nil }
