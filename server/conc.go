package server

// The concurrency family's commands: CONC.ACQUIRE, CONC.RELEASE, CONC.RENEW.
func concCommands() []*command { return nil }
