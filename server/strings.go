package server

import (
	"errors"

	"github.com/sluicehq/sluice/engine"
)

// Parsers of the string commands.

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
				return errDecrOverflow
			}
			n = -n
		}
		c.N[0] = n
		return nil
	}
}

// parseSet: SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]
func parseSet(c *engine.Command, args [][]byte) error {
	c.Key, c.Value = args[1], args[2]
	expirySet := false
	// As Redis, the options' syntax is checked first and the expiry's
	// value after, so a syntax error wins over a bad expiry.
	var expiry []byte
	unit, relative := unitSeconds, false
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
			if a[0] == 'p' || a[0] == 'P' {
				unit = unitMillis
			}
			relative = len(a) == 2
			expiry = args[i+1]
			expirySet = true
			i++
		default:
			return errSyntax
		}
	}
	if expiry == nil {
		return nil
	}
	n, err := scaleTime(expiry, unit, relative, "set")
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
	return nil
}

// stringCommands are the string and key commands beyond the first ones
// (to come).
func stringCommands() []*command { return nil }
