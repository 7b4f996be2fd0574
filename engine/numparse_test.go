package engine

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine/ratelimit"
)

func TestParseInt64(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"42", 42, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551615", 0, false},
		{"18446744073709551616", 0, false},
		{"99999999999999999999999", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false},
		{"00", 0, false},
		{"007", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"--1", 0, false},
		{"1-", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseInt64([]byte(tt.in))
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseInt64(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrNotInteger) {
			t.Errorf("ParseInt64(%q): error %v is not ErrNotInteger", tt.in, err)
		}
	}
	if ErrNotInteger.Error() != "value is not an integer or out of range" {
		t.Errorf("ErrNotInteger wording changed: %q", ErrNotInteger)
	}
}

func TestParseDurationSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"60", 60e9, nil},
		{"0.5", 5e8, nil},
		{".5", 5e8, nil},
		{"1.", 1e9, nil},
		{"1.25", 1.25e9, nil},
		{"0.001", 1e6, nil},
		{"0.000000001", 1, nil},
		{"007.250", 7.25e9, nil},
		{"3600", 3600e9, nil},
		{"2305843009.213693952", ratelimit.MaxDuration, nil},
		{"2305843009.213693953", 0, ErrDurationRange},
		{"2305843010", 0, ErrDurationRange},
		{"99999999999999999999999999", 0, ErrDurationRange},
		{"0000000000000000000000001", 1e9, nil},
		{"0.0000000001", 0, ErrDurationPrecision},
		{"1.0000000000", 0, ErrDurationPrecision},
		{"-1", 0, ErrDurationNegative},
		{"-0.5", 0, ErrDurationNegative},
		{"", 0, ErrDurationSyntax},
		{".", 0, ErrDurationSyntax},
		{"-", 0, ErrDurationSyntax},
		{"-.", 0, ErrDurationSyntax},
		{"+1", 0, ErrDurationSyntax},
		{"1e3", 0, ErrDurationSyntax},
		{"1E3", 0, ErrDurationSyntax},
		{"inf", 0, ErrDurationSyntax},
		{"nan", 0, ErrDurationSyntax},
		{" 1", 0, ErrDurationSyntax},
		{"1 ", 0, ErrDurationSyntax},
		{"1.2.3", 0, ErrDurationSyntax},
		{"0x10", 0, ErrDurationSyntax},
		{"--1", 0, ErrDurationSyntax},
		{"1,5", 0, ErrDurationSyntax},
	}
	for _, tt := range tests {
		got, err := ParseDurationSeconds([]byte(tt.in))
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("ParseDurationSeconds(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestRounding(t *testing.T) {
	tests := []struct{ ns, s, ms int64 }{
		{-1, -1, -1},
		{0, 0, 0},
		{1, 0, 1},
		{999_999, 0, 1},
		{1_000_000, 1, 1},
		{1_000_001, 1, 2},
		{1e9, 1, 1000},
		{2_000_000_001, 2, 2001},
		{2_000_999_999, 2, 2001},
		{2_001_000_000, 3, 2001},
		{2_999_999_999, 3, 3000},
		{math.MaxInt64, 9_223_372_037, 9_223_372_036_855},
	}
	for _, tt := range tests {
		if got := SecondsRoundedUp(tt.ns); got != tt.s {
			t.Errorf("SecondsRoundedUp(%d) = %d, want %d", tt.ns, got, tt.s)
		}
		if got := MillisRoundedUp(tt.ns); got != tt.ms {
			t.Errorf("MillisRoundedUp(%d) = %d, want %d", tt.ns, got, tt.ms)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	inputs := [][]byte{[]byte("12345"), []byte("-9"), []byte("x"), []byte("99999999999999999999")}
	durs := [][]byte{[]byte("0.5"), []byte("60"), []byte("1e3"), []byte("-1"), []byte("99999999999")}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		for _, b := range inputs {
			v, _ := ParseInt64(b)
			sink += v
		}
		for _, b := range durs {
			v, _ := ParseDurationSeconds(b)
			sink += v + SecondsRoundedUp(v) + MillisRoundedUp(v)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	_ = sink
}

// FuzzParseInt64 checks that nothing panics, that accepted text is exactly
// the canonical spelling of its value, and that every canonical int64 is
// accepted.
func FuzzParseInt64(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "10", "60", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "007", "-0", "+5", "1e3", " 1", "", "-", "4", "500000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseInt64(b)
		if err != nil {
			if !errors.Is(err, ErrNotInteger) {
				t.Fatalf("%q: unexpected error %v", b, err)
			}
			if sv, serr := strconv.ParseInt(string(b), 10, 64); serr == nil && strconv.FormatInt(sv, 10) == string(b) {
				t.Fatalf("%q: canonical integer rejected", b)
			}
			return
		}
		if s := strconv.FormatInt(v, 10); s != string(b) {
			t.Fatalf("%q parsed as %d, which formats as %q", b, v, s)
		}
	})
}

// FuzzParseDurationSeconds checks that nothing panics and that an accepted
// value is exactly the decimal number written, to the nanosecond: formatting
// it back and parsing again gives the same nanoseconds, and big.Rat agrees.
func FuzzParseDurationSeconds(f *testing.F) {
	for _, s := range []string{"0", "60", "0.5", ".5", "1.", "1.25", "0.001", "3600", "10", "2",
		"2305843009.213693952", "2305843009.213693953", "0.0000000001", "-1", "1e3", "inf", "nan",
		"", ".", "1.2.3", "+1", " 1", "00000000000000000000000000001.5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ns, err := ParseDurationSeconds(b)
		if err != nil {
			for _, e := range []error{ErrDurationSyntax, ErrDurationNegative, ErrDurationPrecision, ErrDurationRange} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("%q: unexpected error %v", b, err)
		}
		if ns < 0 || ns > ratelimit.MaxDuration {
			t.Fatalf("%q: %d out of range", b, ns)
		}
		s := formatSeconds(ns)
		again, err := ParseDurationSeconds([]byte(s))
		if err != nil || again != ns {
			t.Fatalf("%q -> %d -> %q -> %d, %v", b, ns, s, again, err)
		}
		str := string(b)
		if strings.HasPrefix(str, ".") {
			str = "0" + str
		}
		r, ok := new(big.Rat).SetString(str)
		if !ok {
			t.Fatalf("%q accepted but big.Rat rejects it", b)
		}
		if want := r.Mul(r, big.NewRat(1e9, 1)); !want.IsInt() || want.Num().Int64() != ns {
			t.Fatalf("%q: got %d ns, exact value is %s ns", b, ns, want.RatString())
		}
	})
}

// formatSeconds writes ns as a decimal number of seconds with no trailing
// zeros, the shape a client would send.
func formatSeconds(ns int64) string {
	s := strconv.FormatInt(ns/1e9, 10)
	frac := ns % 1e9
	if frac == 0 {
		return s
	}
	fs := strconv.FormatInt(frac+1e9, 10)[1:]
	return s + "." + strings.TrimRight(fs, "0")
}
