package server

import (
	"bytes"
	"errors"
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/ratelimit"
)

// Parsers turn a command's arguments (args[0] is the name) into a typed
// engine.Command or an error naming the argument. They never touch state.

var (
	errNegative    = errors.New("must not be negative")
	errNotPositive = errors.New("must be positive")
	errLimitCount  = errors.New("does not match the number of limits that follow")
	errNotLimit    = errors.New("is not a decision command (CL.THROTTLE, SW.CHECK, SL.CHECK, FW.CHECK)")
	errIncomplete  = errors.New("is missing arguments")
	errLogLimit    = errors.New("is too large for a sliding log (at most 65536)")
)

// maxLogLimit keeps a sliding log's worst case (one entry per unit) inside
// one storage page.
const maxLogLimit = 65536

func parseInt(name string, b []byte) (int64, error) {
	n, err := engine.ParseInt64(b)
	if err != nil {
		return 0, badArg(name, b, err)
	}
	return n, nil
}

func parseNonNegative(name string, b []byte) (int64, error) {
	n, err := parseInt(name, b)
	if err == nil && n < 0 {
		err = badArg(name, b, errNegative)
	}
	return n, err
}

func parseSeconds(name string, b []byte) (int64, error) {
	ns, err := engine.ParseDurationSeconds(b)
	if err != nil {
		return 0, badArg(name, b, err)
	}
	if ns <= 0 {
		return 0, badArg(name, b, errNotPositive)
	}
	return ns, nil
}

func isWord(b []byte, w string) bool { return strings.EqualFold(string(b), w) }

// trailingMS strips an optional MS flag from the end of a decision's args.
func trailingMS(args [][]byte) ([][]byte, engine.Flags) {
	if n := len(args); n > 0 && isWord(args[n-1], "ms") {
		return args[:n-1], engine.FlagMS
	}
	return args, 0
}

// parseThrottle: CL.THROTTLE key max_burst count period [quantity] [MS]
func parseThrottle(c *engine.Command, args [][]byte) error {
	args, flags := trailingMS(args)
	if len(args) < 5 || len(args) > 6 {
		return errSyntax
	}
	c.Flags, c.Key = flags, args[1]
	var err error
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
	args, flags := trailingMS(args)
	if len(args) < 4 || len(args) > 5 {
		return errSyntax
	}
	c.Flags, c.Key = flags, args[1]
	var err error
	if c.N[0], err = parseInt("limit", args[2]); err != nil {
		return err
	}
	if c.N[0] < 1 {
		return badArg("limit", args[2], errNotPositive)
	}
	if c.Op == engine.OpSLCheck && c.N[0] > maxLogLimit {
		return badArg("limit", args[2], errLogLimit)
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

// parseLimitAll: LIMIT.ALL n <limit> [<limit> ...]
func parseLimitAll(c *engine.Command, args [][]byte) error {
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
		if row == nil || row.limitArgs == 0 {
			return badArg("limit", rest[0], errNotLimit)
		}
		want := row.limitArgs
		if len(rest) < want {
			return badArg(name, rest[0], errIncomplete)
		}
		take := want
		if len(rest) > want && isWord(rest[want], "ms") {
			take++
		}
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

// parseKey: a command whose only argument is its key.
func parseKey(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	return nil
}

// parseKeys builds a multi-key command from args[1:] (the row's op once
// per key), or a plain single-key one when there is only one key and the
// reply shape allows it.
func parseKeys(multi engine.MultiKind, flags engine.Flags) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Flags = flags
		if len(args) == 2 && multi == engine.MultiSum {
			c.Key = args[1]
			return nil
		}
		c.Multi = multi
		for _, k := range args[1:] {
			c.Sub = append(c.Sub, engine.Command{Op: c.Op, Key: k, Flags: flags})
		}
		return nil
	}
}

func parseRefund(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	var err error
	c.N[0], err = parseNonNegative("amount", args[2])
	return err
}

func parseTTL(millis bool) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Key = args[1]
		if millis {
			c.N[0] = 1
		}
		return nil
	}
}

func parseIncr(sign int64, byArg bool) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Key, c.N[0] = args[1], sign
		if !byArg {
			return nil
		}
		n, err := engine.ParseInt64(args[2])
		if err != nil {
			return engine.ErrNotInteger
		}
		if sign < 0 {
			if n == -1<<63 {
				return engine.ErrOverflow
			}
			n = -n
		}
		c.N[0] = n
		return nil
	}
}

// unit scales an expiry argument to nanoseconds.
const (
	unitSeconds = int64(1e9)
	unitMillis  = int64(1e6)
)

// scaleTime converts a Redis expiry argument to ns, refusing overflow the
// way Redis does ("invalid expire time in 'set' command").
func scaleTime(b []byte, unit int64, relative bool, cmd string) (int64, error) {
	n, err := engine.ParseInt64(b)
	if err != nil {
		return 0, engine.ErrNotInteger
	}
	bad := errors.New("invalid expire time in '" + cmd + "' command")
	if relative && n <= 0 && cmd == "set" {
		return 0, bad
	}
	if n > engine.MaxTime/unit || n < -engine.MaxTime/unit {
		return 0, bad
	}
	return n * unit, nil
}

// parseSet: SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]
func parseSet(c *engine.Command, args [][]byte) error {
	c.Key, c.Value = args[1], args[2]
	expirySet := false
	for i := 3; i < len(args); i++ {
		a := args[i]
		switch {
		case isWord(a, "nx") && c.Flags&engine.FlagXX == 0:
			c.Flags |= engine.FlagNX
		case isWord(a, "xx") && c.Flags&engine.FlagNX == 0:
			c.Flags |= engine.FlagXX
		case isWord(a, "get"):
			c.Flags |= engine.FlagGet
		case isWord(a, "keepttl") && !expirySet:
			c.Flags |= engine.FlagKeepTTL
			expirySet = true
		case (isWord(a, "ex") || isWord(a, "px") || isWord(a, "exat") || isWord(a, "pxat")) && !expirySet && i+1 < len(args):
			unit := unitSeconds
			if a[0] == 'p' || a[0] == 'P' {
				unit = unitMillis
			}
			relative := len(a) == 2
			n, err := scaleTime(args[i+1], unit, relative, "set")
			if err != nil {
				return err
			}
			if !relative && n <= 0 {
				return errors.New("invalid expire time in 'set' command")
			}
			c.N[0] = n
			if relative {
				c.Flags |= engine.FlagRelative
			}
			expirySet = true
			i++
		default:
			return errSyntax
		}
	}
	return nil
}

// parseExpire: EXPIRE|PEXPIRE|EXPIREAT|PEXPIREAT key time [NX|XX|GT|LT]
func parseExpire(unit int64, relative bool, name string) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Key = args[1]
		n, err := scaleTime(args[2], unit, relative, name)
		if err != nil {
			return err
		}
		c.N[0] = n
		if relative {
			c.Flags |= engine.FlagRelative
		}
		for _, a := range args[3:] {
			switch {
			case isWord(a, "nx"):
				c.Flags |= engine.FlagNX
			case isWord(a, "xx"):
				c.Flags |= engine.FlagXX
			case isWord(a, "gt"):
				c.Flags |= engine.FlagGT
			case isWord(a, "lt"):
				c.Flags |= engine.FlagLT
			default:
				return errors.New("Unsupported option " + string(a))
			}
		}
		f := c.Flags
		if f&engine.FlagNX != 0 && f&(engine.FlagXX|engine.FlagGT|engine.FlagLT) != 0 {
			return errors.New("NX and XX, GT or LT options at the same time are not compatible")
		}
		if f&engine.FlagGT != 0 && f&engine.FlagLT != 0 {
			return errors.New("GT and LT options at the same time are not compatible")
		}
		return nil
	}
}

// parseScan: SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
func parseScan(c *engine.Command, args [][]byte) error {
	cur, err := engine.ParseInt64(args[1])
	if err != nil && !bytes.Equal(args[1], []byte("0")) {
		return errors.New("invalid cursor")
	}
	c.N[0], c.N[1] = cur, 10
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return errSyntax
		}
		switch {
		case isWord(args[i], "match"):
			c.Pattern = args[i+1]
		case isWord(args[i], "count"):
			n, err := engine.ParseInt64(args[i+1])
			if err != nil {
				return engine.ErrNotInteger
			}
			if n < 1 {
				return errSyntax
			}
			c.N[1] = min(n, 1<<20)
		case isWord(args[i], "type"):
			c.TypeFilter = bytes.ToLower(args[i+1])
		default:
			return errSyntax
		}
	}
	return nil
}

func parseKeysPattern(c *engine.Command, args [][]byte) error {
	c.Pattern = args[1]
	return nil
}

func parseFlush(c *engine.Command, args [][]byte) error {
	for _, a := range args[1:] {
		if !isWord(a, "sync") && !isWord(a, "async") {
			return errSyntax
		}
	}
	return nil
}
