package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"

	"bytes"
	"errors"
)

// Parsers of the key commands and the key-space commands.

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

// scaleTime converts a Redis expiry argument to ns, refusing overflow the
// way Redis does ("invalid expire time in 'set' command").
func scaleTime(b []byte, unit int64, relative bool, cmd string) (int64, error) {
	n, err := engine.ParseInt64(b)
	if err != nil {
		return 0, engine.ErrNotInteger
	}
	if (relative && n <= 0 && cmd == "set") || n > clock.Max/unit || n < -clock.Max/unit {
		return 0, errors.New("invalid expire time in '" + cmd + "' command")
	}
	return n * unit, nil
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
