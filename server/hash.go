package server

// hashCommands are the hash commands (to come).
func hashCommands() []*command { return nil }
