package server

import "github.com/sluicehq/sluice/engine"

// Placeholder families, replaced by their files as they land.

func stringCommands() []*command { return nil }
func hashCommands() []*command   { return nil }
func listCommands() []*command   { return nil }
func setCommands() []*command    { return nil }
func zsetCommands() []*command   { return nil }
func txCommands() []*command     { return nil }

// parseKeyArgs is the parser of a data-type command: the key, then the
// arguments as sent, which the engine op parses on the shard owner in the
// order Redis checks them.
func parseKeyArgs(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	c.Args = append(c.Args[:0], args[2:]...)
	return nil
}
