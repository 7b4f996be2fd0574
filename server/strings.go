package server

import (
	"errors"
	"strings"

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

// stringCommands are the string and key commands beyond the first ones.
func stringCommands() []*command {
	const strW = flagWrite | flagDenyOOM | flagFast
	return []*command{
		{name: "setnx", cats: catString, keyPerm: permWrite, arity: 3, flags: strW, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Set a key's value only if the key does not exist; 1 if set.", args: []argSpec{key("key"), str("value")},
			op: engine.OpSet, parse: parseSetNX},
		{name: "setex", cats: catString, keyPerm: permWrite, arity: 4, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.0.0",
			summary: "Set a key's value and time to live in seconds.", args: []argSpec{key("key"), integer("seconds"), str("value")},
			op: engine.OpSet, parse: parseSetEx(unitSeconds, "setex")},
		{name: "psetex", cats: catString, keyPerm: permWrite, arity: 4, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.6.0",
			summary: "Set a key's value and time to live in milliseconds.", args: []argSpec{key("key"), integer("milliseconds"), str("value")},
			op: engine.OpSet, parse: parseSetEx(unitMillis, "psetex")},
		{name: "getset", cats: catString, keyPerm: permAll, arity: 3, flags: strW, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Set a key's value, dropping its expiry; reply the old value.", args: []argSpec{key("key"), str("value")},
			op: engine.OpSet, parse: parseGetSet},
		{name: "getdel", cats: catString, keyPerm: permAll, arity: 2, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "6.2.0",
			summary: "Get a key's value and delete the key.", args: []argSpec{key("key")}, op: engine.OpGetDel, parse: parseKey},
		{name: "getex", cats: catString, keyPerm: permAll, arity: -2, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "6.2.0",
			summary: "Get a key's value and set or remove its expiry.",
			args:    []argSpec{key("key"), opt(integer("EX seconds")), opt(integer("PX milliseconds")), opt(integer("EXAT unix-time-seconds")), opt(integer("PXAT unix-time-milliseconds")), token("PERSIST")},
			op:      engine.OpGetEx, parse: parseKeyArgs},
		{name: "incrbyfloat", cats: catString, keyPerm: permAll, arity: 3, flags: strW, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.6.0",
			summary: "Add a floating point increment to a key's value.", args: []argSpec{key("key"), seconds("increment")},
			op: engine.OpIncrByFloat, parse: parseKeyArgs},
		{name: "mset", cats: catString, keyPerm: permWrite, arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 2, group: "string", since: "1.0.1",
			summary: "Set several keys' values, all at once.", args: []argSpec{many(key("key")), many(str("value"))},
			op: engine.OpSet, parse: parseMSet},
		{name: "strlen", cats: catString, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.2.0",
			summary: "Length of a key's value.", args: []argSpec{key("key")}, op: engine.OpStrLen, parse: parseKey},
		{name: "append", cats: catString, keyPerm: permAll, arity: 3, flags: strW, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.0.0",
			summary: "Append to a key's value; reply the new length.", args: []argSpec{key("key"), str("value")},
			op: engine.OpAppend, parse: parseAppend},
		{name: "getrange", cats: catString, keyPerm: permRead, arity: 4, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.4.0",
			summary: "A substring of a key's value, by byte offsets (negative: from the end).", args: []argSpec{key("key"), integer("start"), integer("end")},
			op: engine.OpGetRange, parse: parseGetRange},
		{name: "substr", cats: catString, keyPerm: permRead, arity: 4, flags: flagReadonly, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "GETRANGE's old name.", args: []argSpec{key("key"), integer("start"), integer("end")},
			op: engine.OpGetRange, parse: parseGetRange},
		{name: "setrange", cats: catString, keyPerm: permWrite, arity: 4, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "2.2.0",
			summary: "Overwrite part of a key's value from a byte offset, zero-padding; reply the new length.", args: []argSpec{key("key"), integer("offset"), str("value")},
			op: engine.OpSetRange, parse: parseSetRange},
		{name: "msetnx", cats: catString, keyPerm: permWrite, arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 2, group: "string", since: "1.0.1",
			summary: "Set several keys' values only if none of them exists; 1 if set.", args: []argSpec{many(key("key")), many(str("value"))},
			op: engine.OpMSetNX, parse: parseMSetNX},
		{name: "rename", cats: catKeyspace, findKeys: renameKeys, arity: 3, flags: flagWrite, firstKey: 1, lastKey: 2, step: 1, group: "generic", since: "1.0.0",
			summary: "Rename a key, replacing the destination.", args: []argSpec{key("key"), key("newkey")},
			op: engine.OpRename, parse: parseRename(0)},
		{name: "renamenx", cats: catKeyspace, findKeys: renameKeys, arity: 3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 2, step: 1, group: "generic", since: "1.0.0",
			summary: "Rename a key only if the destination does not exist.", args: []argSpec{key("key"), key("newkey")},
			op: engine.OpRename, parse: parseRename(engine.FlagNX)},
		{name: "expiretime", cats: catKeyspace, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "7.0.0",
			summary: "A key's expiry as a unix time in seconds.", args: []argSpec{key("key")}, op: engine.OpTTL, parse: parseTTLMode(engine.TTLUnixSeconds)},
		{name: "pexpiretime", cats: catKeyspace, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "7.0.0",
			summary: "A key's expiry as a unix time in milliseconds.", args: []argSpec{key("key")}, op: engine.OpTTL, parse: parseTTLMode(engine.TTLUnixMillis)},
		{name: "touch", cats: catKeyspace, keyPerm: permRead, arity: -2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "3.2.1",
			summary: "Count how many of the keys exist.", args: []argSpec{many(key("key"))}, op: engine.OpExists, parse: parseKeys(engine.MultiSum, 0)},
		{name: "object", arity: -2, group: "generic", since: "2.2.3",
			summary: "OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key, OBJECT HELP.", args: []argSpec{str("subcommand"), opt(key("key"))},
			subs: []*command{
				keySub("encoding", 3, flagReadonly, catKeyspace), keySub("freq", 3, flagReadonly, catKeyspace), sub("help", 2, 0, catKeyspace),
				keySub("idletime", 3, flagReadonly, catKeyspace), keySub("refcount", 3, flagReadonly, catKeyspace),
			},
			run: cmdObject},
	}
}

func parseSetNX(c *engine.Command, args [][]byte) error {
	c.Key, c.Value, c.Flags = args[1], args[2], engine.FlagNX|engine.FlagIntReply
	return nil
}

func parseGetSet(c *engine.Command, args [][]byte) error {
	c.Key, c.Value, c.Flags = args[1], args[2], engine.FlagGet
	return nil
}

// parseSetEx: SETEX/PSETEX key time value; the time must be positive.
func parseSetEx(unit int64, name string) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		n, err := scaleTime(args[2], unit, true, name)
		if err != nil {
			return err
		}
		if n <= 0 {
			return errors.New("invalid expire time in '" + name + "' command")
		}
		c.Key, c.Value, c.N[0], c.Flags = args[1], args[3], n, engine.FlagRelative
		return nil
	}
}

// parseGetRange: GETRANGE key start end; both are integers, checked
// before the key.
func parseGetRange(c *engine.Command, args [][]byte) error {
	start, err := engine.ParseInt64(args[2])
	if err != nil {
		return engine.ErrNotInteger
	}
	end, err := engine.ParseInt64(args[3])
	if err != nil {
		return engine.ErrNotInteger
	}
	c.Key, c.N[0], c.N[1] = args[1], start, end
	return nil
}

var errOffsetRange = errors.New("offset is out of range")

// parseSetRange: SETRANGE key offset value.
func parseSetRange(c *engine.Command, args [][]byte) error {
	offset, err := engine.ParseInt64(args[2])
	if err != nil {
		return engine.ErrNotInteger
	}
	if offset < 0 {
		return errOffsetRange
	}
	c.Key, c.N[0], c.Value = args[1], offset, args[3]
	return nil
}

// parseMSetNX: MSETNX key value [key value ...].
func parseMSetNX(c *engine.Command, args [][]byte) error {
	if len(args)%2 == 0 {
		return errors.New("wrong number of arguments for 'msetnx' command")
	}
	for i := 1; i+1 < len(args); i += 2 {
		c.Sub = append(c.Sub, engine.Command{Op: engine.OpMSetNX, Key: args[i], Value: args[i+1]})
	}
	return nil
}

// parseMSet: MSET key value [key value ...], all keys set at once.
func parseMSet(c *engine.Command, args [][]byte) error {
	if len(args)%2 == 0 {
		return errors.New("wrong number of arguments for 'mset' command")
	}
	c.Multi = engine.MultiOK
	for i := 1; i+1 < len(args); i += 2 {
		c.Sub = append(c.Sub, engine.Command{Op: engine.OpSet, Key: args[i], Value: args[i+1]})
	}
	return nil
}

func parseAppend(c *engine.Command, args [][]byte) error {
	c.Key, c.Value = args[1], args[2]
	return nil
}

func parseRename(flags engine.Flags) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Flags = flags
		c.Sub = append(c.Sub, engine.Command{Op: engine.OpRename, Key: args[1]}, engine.Command{Op: engine.OpRename, Key: args[2]})
		return nil
	}
}

// renameKeys: RENAME reads and deletes its source and writes its
// destination.
func renameKeys(args [][]byte, buf []keyRef) []keyRef {
	return append(buf, keyRef{at: 1, need: permAll}, keyRef{at: 2, need: permWrite})
}

func parseTTLMode(mode int64) func(*engine.Command, [][]byte) error {
	return func(c *engine.Command, args [][]byte) error {
		c.Key, c.N[0] = args[1], mode
		return nil
	}
}

var objectHelp = []string{
	"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ENCODING <key>",
	"    Return the kind of internal representation used in order to store the value",
	"    associated with a <key>.",
	"FREQ <key>",
	"    Return the access frequency index of the <key>. The returned integer is",
	"    proportional to the logarithm of the recent access frequency of the key.",
	"IDLETIME <key>",
	"    Return the idle time of the <key>, that is the approximated number of",
	"    seconds elapsed since the last access to the key.",
	"REFCOUNT <key>",
	"    Return the number of references of the value associated with the specified",
	"    <key>.",
	"HELP",
	"    Print this help.",
}

// cmdObject: OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key, and HELP.
func cmdObject(s *Server, c *client, args [][]byte) {
	which := map[string]int64{"encoding": engine.ObjectEncoding, "refcount": engine.ObjectRefCount,
		"idletime": engine.ObjectIdleTime, "freq": engine.ObjectFreq}
	sub := strings.ToLower(string(args[1]))
	if sub == "help" {
		c.writeArray(len(objectHelp))
		for _, line := range objectHelp {
			c.writeStatus(line)
		}
		return
	}
	r := c.execEngine(engine.Command{Op: engine.OpObject, Key: args[2], N: [4]int64{which[sub]}})[0]
	c.writeReply(&r)
}
