// Package glob matches Redis's glob-style patterns (KEYS, SCAN MATCH, the
// HSCAN family, ACL key patterns, CONFIG GET) with Redis's semantics:
// '*' any run of bytes, '?' one byte, '[abc]', '[^abc]' and '[a-z]'
// classes (an unterminated class ends with the pattern), and '\' quoting
// the next byte, everywhere including inside a class. Patterns and
// subjects are bytes, not runes, as in Redis.
package glob

// Match reports whether s matches pattern.
func Match(pattern, s string) bool { return match(pattern, s, false) }

// MatchFold is Match ignoring ASCII case (CONFIG GET).
func MatchFold(pattern, s string) bool { return match(pattern, s, true) }

// match walks both strings once, remembering only the last '*': a later
// star can always absorb what an earlier one would, so backtracking to the
// last one is enough, and no pattern costs more than len(p)*len(s).
func match(p, s string, fold bool) bool {
	pi, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				star, starS = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if next, ok := matchClass(p, pi, s[si], fold); ok {
					pi = next
					si++
					continue
				}
			default:
				c := p[pi]
				next := pi + 1
				if c == '\\' && pi+1 < len(p) {
					c = p[pi+1]
					next = pi + 2
				}
				if equal(c, s[si], fold) {
					pi = next
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last star absorb one more byte and try again.
		starS++
		pi, si = star, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches c against the class starting at p[start] ('['), and
// returns the position after the class.
func matchClass(p string, start int, c byte, fold bool) (int, bool) {
	i := start + 1
	negate := i < len(p) && p[i] == '^'
	if negate {
		i++
	}
	matched := false
	for i < len(p) && p[i] != ']' {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			// Redis compares a quoted byte exactly, even ignoring case.
			if p[i+1] == c {
				matched = true
			}
			i += 2
		case i+2 < len(p) && p[i+1] == '-':
			// Redis compares range bounds as C chars, signed on the
			// machines it runs on.
			lo, hi, cc := int8(p[i]), int8(p[i+2]), int8(c)
			if lo > hi {
				lo, hi = hi, lo
			}
			if fold {
				lo, hi, cc = int8(lower(byte(lo))), int8(lower(byte(hi))), int8(lower(c))
			}
			if lo <= cc && cc <= hi {
				matched = true
			}
			i += 3
		default:
			if equal(p[i], c, fold) {
				matched = true
			}
			i++
		}
	}
	if i < len(p) {
		i++ // the closing ']'
	}
	if negate {
		matched = !matched
	}
	return i, matched
}

func equal(a, b byte, fold bool) bool {
	if fold {
		return lower(a) == lower(b)
	}
	return a == b
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
