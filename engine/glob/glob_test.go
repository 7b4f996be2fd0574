package glob

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "anything", true}, {"", "", true}, {"", "a", false},
		{"?", "a", true}, {"?", "", false}, {"?", "\xff", true}, {"??", "é", true}, // bytes, not runes
		{"h*o", "hello", true}, {"h*o", "hell", false}, {"*a*b*", "xaxxbx", true}, {"*a*b", "ab ba", false},
		{"[ab]", "a", true}, {"[ab]", "c", false}, {"[^ab]", "c", true}, {"[^ab]", "a", false},
		{"[a-c]x", "bx", true}, {"[c-a]x", "bx", true}, {"[a-c]", "d", false},
		{`\*`, "*", true}, {`\*`, "a", false}, {`a\`, `a\`, true}, {`[\]]`, "]", true}, {`[\-]`, "-", true},
		{"[", "a", false}, {"[abc", "b", true}, {"[a-", "-", true},
		{"*[}]*", "{t}x", true}, {`\{t}*`, "{t}1", true},
	} {
		if got := Match(c.pattern, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
	if !MatchFold("MaxMemory*", "maxmemory-policy") || MatchFold("max", "maxmemory") {
		t.Error("MatchFold")
	}
}

// Many stars cannot make a match slow: the walk backtracks to the last
// star only.
func TestMatchIsLinearish(t *testing.T) {
	p := strings.Repeat("*a", 30) + "b"
	if Match(p, strings.Repeat("a", 10000)) {
		t.Fatal("matched")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("[a-c]*\\", "b")
	f.Fuzz(func(t *testing.T, p, s string) {
		Match(p, s)
		MatchFold(p, s)
		if !Match("*", s) || (p == s && !strings.ContainsAny(p, `*?[\`) && !Match(p, s)) {
			t.Fatal("inconsistent")
		}
	})
}
