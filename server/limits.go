package server

import (
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/ratelimit"
)

// Parsers of the rate-limit commands: the decisions, LIMIT.ALL and
// LIMIT.REFUND.

// trailingReqID takes an optional REQID id from the end of a decision's or
// a refund's args (after every other argument, MS included: a redis-cell
// client never sends it). The receipt's lifetime is the default until the connection
// stamps the server's reqid-window (client.parse).
func trailingReqID(c *engine.Command, args [][]byte) ([][]byte, error) {
	n := len(args)
	if n < 4 || !isWord(args[n-2], "reqid") {
		return args, nil
	}
	if id := args[n-1]; len(id) == 0 || len(id) > engine.MaxReqIDLen {
		return nil, errReqIDLength
	}
	c.ReqID, c.ReqTTL = args[n-1], engine.DefaultReqIDWindow
	return args[:n-2], nil
}

// trailingMS strips an optional MS flag from the end of a decision's args.
func trailingMS(args [][]byte) ([][]byte, engine.Flags) {
	if n := len(args); n > 0 && isWord(args[n-1], "ms") {
		return args[:n-1], engine.FlagMS
	}
	return args, 0
}

// parseThrottle: CL.THROTTLE key max_burst count period [quantity] [MS]
func parseThrottle(c *engine.Command, args [][]byte) error {
	args, err := trailingReqID(c, args)
	if err != nil {
		return err
	}
	args, flags := trailingMS(args)
	if len(args) < 5 || len(args) > 6 {
		return errSyntax
	}
	c.Flags, c.Key = flags, args[1]
	if c.N[0], err = parseNonNegative("max_burst", args[2]); err != nil {
		return err
	}
	if c.N[1], err = parseInt("count", args[3]); err != nil {
		return err
	}
	if c.N[1] < 1 {
		return badArg("count", args[3], errNotPositive)
	}
	if c.N[2], err = parseSeconds("period", args[4]); err != nil {
		return err
	}
	c.N[3] = 1
	if len(args) == 6 {
		if c.N[3], err = parseNonNegative("quantity", args[5]); err != nil {
			return err
		}
	}
	p := ratelimit.GCRAParams{MaxBurst: c.N[0], Count: c.N[1], Period: c.N[2]}
	if err := p.Validate(); err != nil {
		return err
	}
	return nil
}

// parseWindowCheck: SW.CHECK|SL.CHECK|FW.CHECK key limit window [cost] [MS]
func parseWindowCheck(c *engine.Command, args [][]byte) error {
	args, err := trailingReqID(c, args)
	if err != nil {
		return err
	}
	args, flags := trailingMS(args)
	if len(args) < 4 || len(args) > 5 {
		return errSyntax
	}
	c.Flags, c.Key = flags, args[1]
	if c.N[0], err = parseInt("limit", args[2]); err != nil {
		return err
	}
	if c.N[0] < 1 {
		return badArg("limit", args[2], errNotPositive)
	}
	if c.Op == engine.OpSLCheck && c.N[0] > engine.MaxLogLimit {
		return badArg("limit", args[2], errLogLimit)
	}
	if c.Op == engine.OpSLCheck && !engine.LogFits(len(c.Key), c.N[0]) {
		return errLogKey
	}
	if c.N[1], err = parseSeconds("window", args[3]); err != nil {
		return err
	}
	c.N[2] = 1
	if len(args) == 5 {
		if c.N[2], err = parseNonNegative("cost", args[4]); err != nil {
			return err
		}
	}
	return ratelimit.WindowParams{Limit: c.N[0], Window: c.N[1]}.Validate()
}

// parseLimitAll: LIMIT.ALL n <limit> [<limit> ...] [REQID id]
func parseLimitAll(c *engine.Command, args [][]byte) error {
	args, err := trailingReqID(c, args)
	if err != nil {
		return err
	}
	n, err := parseInt("numlimits", args[1])
	if err != nil {
		return err
	}
	if n < 1 {
		return badArg("numlimits", args[1], errNotPositive)
	}
	rest := args[2:]
	for len(rest) > 0 {
		name := strings.ToLower(string(rest[0]))
		row := commands[name]
		if name == "reqid" {
			return errReqIDPlace
		}
		if row == nil || row.limitArgs == 0 {
			return badArg("limit", rest[0], errNotLimit)
		}
		want := row.limitArgs
		if len(rest) < want {
			return badArg(name, rest[0], errIncomplete)
		}
		take := limitTake(row, rest)
		if int64(len(c.Sub)) == n {
			return badArg("numlimits", args[1], errLimitCount)
		}
		c.Sub = append(c.Sub, engine.Command{})
		sub := &c.Sub[len(c.Sub)-1]
		if err := row.parseInto(sub, rest[:take]); err != nil {
			return err
		}
		rest = rest[take:]
	}
	if int64(len(c.Sub)) != n {
		return badArg("numlimits", args[1], errLimitCount)
	}
	return nil
}

// limitTake is how many of rest (a limit inside LIMIT.ALL, its name first)
// the limit takes: its full form, then the options it knows (MS for
// every decision, MAXWAIT ms for LB.RESERVE, ID id for CONC.ACQUIRE), in
// any order. The limit's own parser then refuses what it does not take
// (MS on CONC.ACQUIRE, ID twice).
func limitTake(row *command, rest [][]byte) int {
	take := min(row.limitArgs, len(rest))
	for take < len(rest) {
		switch {
		case isWord(rest[take], "ms"):
			take++
		case row.op == engine.OpLBReserve && isWord(rest[take], "maxwait") && take+1 < len(rest),
			row.op == engine.OpConcAcquire && isWord(rest[take], "id") && take+1 < len(rest):
			take += 2
		default:
			return take
		}
	}
	return take
}

func parseRefund(c *engine.Command, args [][]byte) error {
	args, err := trailingReqID(c, args)
	if err != nil {
		return err
	}
	if len(args) != 3 {
		return errSyntax
	}
	c.Key = args[1]
	c.N[0], err = parseNonNegative("amount", args[2])
	return err
}
