package server

// The leaky bucket's commands: LB.RESERVE, LB.CANCEL.
func leakyCommands() []*command { return nil }
