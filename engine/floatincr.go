package engine

import (
	"math/big"
	"strings"
)

// INCRBYFLOAT and HINCRBYFLOAT compute in C's long double, which on the
// x86-64 machines Redis runs on is the x87 80-bit format: a 64-bit
// mantissa and a 15-bit exponent. big.Float at 64 bits of precision
// rounds the same way, so the sums and their printed form agree with
// Redis's ("0.1" + "0.2" is "0.3", not 0.30000000000000004).

const (
	longDoublePrec = 64
	// Exponents (as big.Float's MantExp reports them) past which strtold
	// overflows to HUGE_VAL or underflows to zero, both refused by Redis.
	longDoubleMaxExp = 16384
	longDoubleMinExp = -16445
)

// parseLongDouble parses b as Redis's string2ld (strtold over the whole
// argument) does; ok is false where Redis refuses it.
func parseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || isSpace(b[0]) {
		return nil, false
	}
	s := string(b)
	if strings.ContainsAny(s, "_") {
		return nil, false
	}
	body := strings.ToLower(strings.TrimLeft(s, "+-"))
	if len(s)-len(body) > 1 {
		return nil, false
	}
	neg := s[0] == '-'
	switch {
	case body == "inf" || body == "infinity":
		return new(big.Float).SetInf(neg), true
	case strings.HasPrefix(body, "nan"):
		return nil, false
	}
	base := 10
	if strings.HasPrefix(body, "0x") {
		base = 0
		if !strings.ContainsAny(body, "p") {
			s += "p0"
		}
	} else if strings.ContainsAny(body, "xobp") {
		return nil, false
	}
	f, _, err := big.ParseFloat(s, base, longDoublePrec, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	if f.Sign() != 0 {
		if exp := f.MantExp(nil); exp > longDoubleMaxExp || exp < longDoubleMinExp {
			return nil, false
		}
	}
	return f, true
}

// incrLongDouble returns cur+incr printed as Redis prints a long double
// (%.17Lf without trailing zeros). ErrNotFloat names a bad increment;
// badCur is returned for an unparsable current value.
func incrLongDouble(cur, incr []byte, badCur error) ([]byte, error) {
	d, ok := parseLongDouble(incr)
	if !ok {
		return nil, ErrNotFloat
	}
	v := new(big.Float).SetPrec(longDoublePrec)
	if cur != nil {
		c, ok := parseLongDouble(cur)
		if !ok {
			return nil, badCur
		}
		v.Set(c)
	}
	if v.IsInf() || d.IsInf() {
		return nil, ErrNaNOrInfinity
	}
	v.Add(v, d)
	if v.Sign() != 0 && v.MantExp(nil) > longDoubleMaxExp {
		return nil, ErrNaNOrInfinity
	}
	return formatLongDouble(v), nil
}

// formatLongDouble is ld2string's human mode: %.17Lf, then trailing zeros
// (and a bare '.') dropped, and "-0" written as "0".
func formatLongDouble(v *big.Float) []byte {
	s := v.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return []byte(s)
}
