package server

import (
	"errors"

	"github.com/sluicehq/sluice/engine"
)

// The concurrency family's commands: CONC.ACQUIRE, CONC.RELEASE, CONC.RENEW.
func concCommands() []*command {
	return []*command{
		{name: "conc.acquire", cats: catLimiter, keyPerm: permAll, arity: -4, flags: flagWrite | flagDenyOOM | flagDecision, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Take one of max concurrent leases for lease_seconds (or renew the lease ID already holds); nil lease id when all are held.",
			args:    []argSpec{key("key"), integer("max"), seconds("lease_seconds"), opt(str("ID id"))},
			op:      engine.OpConcAcquire, limitArgs: 4, parse: parseConcAcquire},
		{name: "conc.release", cats: catLimiter, keyPerm: permAll, arity: 3, flags: flagWrite, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Give a lease back: 1 when a live lease had the id, else 0.",
			args:    []argSpec{key("key"), str("id")}, op: engine.OpConcRelease, parse: parseConcRelease},
		{name: "conc.renew", cats: catLimiter, keyPerm: permAll, arity: 4, flags: flagWrite, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Extend a live lease to lease_seconds from now: 1, or 0 when no live lease has the id.",
			args:    []argSpec{key("key"), str("id"), seconds("lease_seconds")}, op: engine.OpConcRenew, parse: parseConcRenew},
	}
}

var (
	errConcMax = errors.New("is too large for a concurrency limit (at most 65536)")
	errConcID  = errors.New("must be 1 to 64 bytes")
)

func concID(c *engine.Command, b []byte) error {
	if len(b) == 0 || len(b) > engine.MaxConcIDLen {
		return badArg("id", b, errConcID)
	}
	c.Value = b
	return nil
}

// parseConcAcquire: CONC.ACQUIRE key max lease_seconds [ID id]
func parseConcAcquire(c *engine.Command, args [][]byte) error {
	if len(args) != 4 && (len(args) != 6 || !isWord(args[4], "id")) {
		return errSyntax
	}
	c.Key = args[1]
	var err error
	if c.N[0], err = parseInt("max", args[2]); err != nil {
		return err
	}
	if c.N[0] < 1 {
		return badArg("max", args[2], errNotPositive)
	}
	if c.N[0] > engine.MaxConcLimit {
		return badArg("max", args[2], errConcMax)
	}
	if c.N[1], err = parseSeconds("lease_seconds", args[3]); err != nil {
		return err
	}
	if len(args) == 6 {
		return concID(c, args[5])
	}
	return nil
}

// parseConcRelease: CONC.RELEASE key id
func parseConcRelease(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	return concID(c, args[2])
}

// parseConcRenew: CONC.RENEW key id lease_seconds
func parseConcRenew(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	if err := concID(c, args[2]); err != nil {
		return err
	}
	var err error
	c.N[0], err = parseSeconds("lease_seconds", args[3])
	return err
}
