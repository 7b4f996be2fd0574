package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/ratelimit"
)

// The leaky bucket's commands: LB.RESERVE, LB.CANCEL.
func leakyCommands() []*command {
	return []*command{
		{name: "lb.reserve", cats: catLimiter, keyPerm: permAll, arity: -4, flags: decisionFlags, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.2.0",
			summary: "Leaky bucket as a meter: reserve the next cost units of a smooth schedule of rate per period and say how long to wait before going.",
			args: []argSpec{key("key"), integer("rate"), seconds("period"), opt(integer("burst")), opt(integer("cost")),
				opt(integer("maxwait_ms")), token("MS")},
			op: engine.OpLBReserve, limitArgs: 6, parse: parseLBReserve},
		{name: "lb.cancel", cats: catLimiter, keyPerm: permAll, arity: 3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.2.0",
			summary: "Give back reserved units of a leaky bucket's schedule that were not used; nil when the key holds no schedule.",
			args:    []argSpec{key("key"), integer("cost")}, op: engine.OpLBCancel, parse: parseLBCancel},
	}
}

// parseLBReserve: LB.RESERVE key rate period [burst] [cost] [MAXWAIT ms] [MS]
// [REQID id] (MAXWAIT and MS in either order, after the positional
// arguments; REQID last, as on every decision).
func parseLBReserve(c *engine.Command, args [][]byte) error {
	args, err := trailingReqID(c, args)
	if err != nil {
		return err
	}
	c.Key = args[1]
	c.N[3] = -1 // no MAXWAIT
	var posBuf [4][]byte
	pos := posBuf[:0]
	for i := 2; i < len(args); i++ {
		switch {
		case isWord(args[i], "ms"):
			c.Flags |= engine.FlagMS
		case isWord(args[i], "maxwait"):
			if i+1 == len(args) {
				return errSyntax
			}
			ms, err := parseNonNegative("maxwait", args[i+1])
			if err != nil {
				return err
			}
			if ms > ratelimit.MaxDuration/1e6 {
				return badArg("maxwait", args[i+1], ratelimit.ErrPeriodTooLarge)
			}
			c.N[3] = ms * 1e6
			i++
		case c.Flags&engine.FlagMS != 0 || c.N[3] >= 0:
			return errSyntax // a positional argument after the options
		case len(pos) == len(posBuf):
			return errSyntax
		default:
			pos = append(pos, args[i])
		}
	}
	if len(pos) < 2 || len(pos) > 4 {
		return errSyntax
	}
	rate, err := parseInt("rate", pos[0])
	if err != nil {
		return err
	}
	period, err := parseSeconds("period", pos[1])
	if err != nil {
		return err
	}
	if c.N[0], err = ratelimit.LBInterval(rate, period); err != nil {
		if err == ratelimit.ErrLBRate {
			return badArg("rate", pos[0], errNotPositive)
		}
		return err
	}
	c.N[1], c.N[2] = 1, 1
	if len(pos) > 2 {
		if c.N[1], err = parseInt("burst", pos[2]); err != nil {
			return err
		}
		if c.N[1] < 1 {
			return badArg("burst", pos[2], errNotPositive)
		}
	}
	if len(pos) > 3 {
		if c.N[2], err = parseNonNegative("cost", pos[3]); err != nil {
			return err
		}
	}
	if err := (ratelimit.LBParams{Interval: c.N[0], Burst: c.N[1]}).Validate(); err != nil {
		return err
	}
	// The parameters as written, when they pack, so that LIMIT.INFO can
	// say them back; else the interval, the same schedule.
	if n0, n1, ok := engine.LBPack(rate, period, c.N[1]); ok {
		c.N[0], c.N[1] = n0, n1
		c.Flags |= engine.FlagAsWritten
	}
	return nil
}

// parseLBCancel: LB.CANCEL key cost
func parseLBCancel(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	var err error
	c.N[0], err = parseNonNegative("cost", args[2])
	return err
}
