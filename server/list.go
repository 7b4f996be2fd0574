package server

// listCommands are the list commands (to come).
func listCommands() []*command { return nil }
