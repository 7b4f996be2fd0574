package script

import (
	"bytes"
	"errors"
	"strings"
)

// Shebang parsing as Redis 7.0's evalExtractShebangFlags: a body that
// starts with "#!" must have a newline; its first line is split as
// sdssplitargs splits (quotes and escapes); the first word must be
// "#!lua"; every other word must be flags=<comma-separated list> of known
// flags. The line is not Lua: it is cut before compiling, keeping its
// newline so that line numbers stay the user's.

var errShebangInvalid = errors.New("Invalid script shebang")

// shebangLen returns the length of body's shebang line without its
// newline (0 when body has none) and its flags.
func parseShebang(body []byte) (Flags, int, error) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return Flags{}, 0, nil
	}
	// strchr on a C string: a NUL before the newline ends the search.
	end := -1
	for i, c := range body {
		if c == '\n' {
			end = i
			break
		}
		if c == 0 {
			break
		}
	}
	if end < 0 {
		return Flags{}, 0, errShebangInvalid
	}
	parts, ok := splitArgs(body[:end])
	if !ok || len(parts) == 0 {
		return Flags{}, 0, errors.New("Invalid engine in script shebang")
	}
	if parts[0] != "#!lua" {
		return Flags{}, 0, errors.New("Unexpected engine in script shebang: " + parts[0])
	}
	f := Flags{Shebang: true}
	for _, p := range parts[1:] {
		list, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return Flags{}, 0, errors.New("Unknown lua shebang option: " + p)
		}
		if list == "" {
			continue // sdssplitlen of an empty string: no elements
		}
		for _, name := range strings.Split(list, ",") {
			switch name {
			case "no-writes":
				f.NoWrites = true
			case "allow-oom":
				f.AllowOOM = true
			case "allow-stale":
				f.AllowStale = true
			case "no-cluster":
				f.NoCluster = true
			case "allow-cross-slot-keys":
				f.AllowCrossSlot = true
			default:
				return Flags{}, 0, errors.New("Unexpected flag in script shebang: " + name)
			}
		}
	}
	return f, end, nil
}

// splitArgs is sdssplitargs over a C string (it stops at a NUL): words
// separated by blanks, "double quotes" with \n \r \t \b \a \xHH and \<any>
// escapes, 'single quotes' with \' only; a closing quote must be followed
// by a blank or the end. ok is false for unbalanced quotes.
func splitArgs(line []byte) (args []string, ok bool) {
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	isHex := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	hexVal := func(c byte) byte {
		switch {
		case c >= '0' && c <= '9':
			return c - '0'
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10
		}
		return c - 'A' + 10
	}
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		var cur []byte
		inq, insq, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					cur = append(cur, hexVal(at(p+2))<<4|hexVal(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					switch e := at(p); e {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, e)
					}
				case c == '"':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, string(cur))
	}
}
