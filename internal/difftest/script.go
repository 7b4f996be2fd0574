package difftest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Scripts: EVAL bodies generated from the other families' commands, each
// called through redis.call or redis.pcall with its key declared in KEYS
// or passed in ARGV (undeclared, which Sluice must still run atomically),
// the results returned as a table; EVALSHA after SCRIPT LOAD and after
// SCRIPT FLUSH; EVAL_RO; and Lua-to-reply conversions.
func init() {
	Register(Family{Name: "script", Gens: scriptGens})
}

// scriptCommand is one command from another family, fit for a script.
func (g *Gen) scriptCommand() []string {
	for {
		cmd := g.bodyCommand()
		switch strings.ToLower(cmd[0]) {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "script", "select", "object", "type":
			// Scripts do not nest; OBJECT and TYPE are fine but their
			// encodings are compared elsewhere.
			continue
		}
		if len(cmd) > 60 {
			// A call of hundreds of arguments meets the compilers'
			// limits (registers per function), where gopher-lua's and
			// Lua's differ; no real script goes near them.
			continue
		}
		return cmd
	}
}

// genScript builds a script of n calls and its EVAL arguments (numkeys,
// keys, args).
func (g *Gen) genScript(n int, protected bool) (string, []string) {
	var body strings.Builder
	var keys, argv []string
	ref := func(v string, isKey bool) string {
		if isKey && !g.Chance(4) {
			keys = append(keys, v)
			return fmt.Sprintf("KEYS[%d]", len(keys))
		}
		argv = append(argv, v)
		return fmt.Sprintf("ARGV[%d]", len(argv))
	}
	body.WriteString("local r = {}\n")
	for i := range n {
		cmd := g.scriptCommand()
		call := "redis.call"
		if protected || g.Chance(3) {
			call = "redis.pcall"
		}
		parts := []string{fmt.Sprintf("%q", strings.ToLower(cmd[0]))}
		for j, a := range cmd[1:] {
			parts = append(parts, ref(a, j == 0))
		}
		fmt.Fprintf(&body, "r[%d] = %s(%s)\n", i+1, call, strings.Join(parts, ", "))
	}
	body.WriteString("return r\n")
	args := append([]string{fmt.Sprint(len(keys))}, keys...)
	return body.String(), append(args, argv...)
}

func shaHex(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// conversions are scripts whose return values exercise Redis's Lua to
// reply conversions.
var conversions = []string{
	"return 3.99", "return -3.99", "return 1e20", "return 0.5", "return true", "return false", "return nil",
	"return {1, 2, nil, 4}", "return {1, {2, {3, 'x'}}, 'y'}", "return {ok='FINE'}", "return {err='MYERR broken'}",
	"return redis.status_reply('DONE')", "return redis.error_reply('CODE message')", "return redis.error_reply('no code')",
	"return 'a' .. 'b'", "return tostring(0.1 + 0.2)", "return tostring(1/3)", "return tostring(1e15)", "return tostring(2^53)",
	"return #ARGV", "return {KEYS[1], ARGV[1]}", "return redis.sha1hex('abc')", "return redis.call('ping')",
	"return redis.call('echo', 'hi')", "return type(redis.call('get', 'no-such-key'))", "return {false, true, 1.5}",
	"return string.format('%d %s %.3f', 7, 'x', 1.25)", "return table.concat({'a', 'b', 'c'}, '-')",
	"return math.floor(-2.5)", "return string.rep('ab', 3)", "return {1, 2, 3, n = 5}",
	"return redis.call('set', KEYS[1], 1.5)", "return redis.call('incrbyfloat', KEYS[1], 0.1)",
	"error('boom')", "error({err='TAGGED oops'})", "return redis.call('nosuchcommand')",
	"return redis.call('get')", "return redis.pcall('incr', 'a', 'b')", "return redis.call('incr')",
	"local t = redis.pcall('nosuch') return t['err']", "return redis.call('get', {})",
	"x = 1", "return undefined_global", "return redis.setresp(3)", "return redis.REDIS_VERSION ~= nil",
	"return redis.replicate_commands()", "return cjson.encode({1, 2, 'x'})", "return math.random(1000)",
	"return bit.band(0xff, 0x0f)", "return struct.pack('>I2', 258)", "return cmsgpack.unpack(cmsgpack.pack({1, 'a'}))",
	"return loadstring", "return os", "return io",
	"redis.setresp(3) return {true, false, {big_number='12345678901234567890'}, {double=1.5}}",
}

func scriptGens(g *Gen) []func() [][]string {
	eval := func(name, body string, args []string) []string {
		return append([]string{name, body}, args...)
	}
	return []func() [][]string{
		// Calls whose errors end the script or come back as error
		// replies inside its table.
		func() [][]string {
			body, args := g.genScript(1+g.R.IntN(4), false)
			return [][]string{eval("EVAL", body, args)}
		},
		func() [][]string {
			body, args := g.genScript(1+g.R.IntN(6), true)
			return [][]string{eval("EVAL", body, args)}
		},
		// A cached script by its SHA1; now and then after a flush.
		func() [][]string {
			body, args := g.genScript(1+g.R.IntN(3), true)
			sha := shaHex(body)
			script := [][]string{{"SCRIPT", "LOAD", body}, eval("EVALSHA", sha, args), {"SCRIPT", "EXISTS", sha, shaHex("nope")}}
			if g.Chance(3) {
				script = append(script, []string{"SCRIPT", "FLUSH"}, eval("EVALSHA", sha, args))
			}
			return script
		},
		// Read-only scripts: reads run, writes are refused.
		func() [][]string {
			body, args := g.genScript(1+g.R.IntN(3), true)
			if g.Chance(3) {
				return [][]string{{"SCRIPT", "LOAD", body}, eval("EVALSHA_RO", shaHex(body), args)}
			}
			return [][]string{eval("EVAL_RO", body, args)}
		},
		func() [][]string {
			c := conversions[g.R.IntN(len(conversions))]
			for g.Replicated && strings.Contains(c, "math.random") {
				c = conversions[g.R.IntN(len(conversions))]
			}
			return [][]string{{"EVAL", c, "1", g.Key(), g.Value()}}
		},
		// Argument errors.
		func() [][]string {
			return [][]string{
				{"EVAL", "return 1", g.Pick("-1", "x", "3", "")},
				{"EVALSHA", g.Pick("", "abc", strings.Repeat("f", 40)), "0"},
				{"SCRIPT", g.Pick("FLUSH", "EXISTS", "NOSUCH", "KILL"), g.Pick("nope", "sync", "async")},
				{"SCRIPT", "LOAD", g.Pick("return", "x = = 1", "return 1 end")},
			}
		},
	}
}
