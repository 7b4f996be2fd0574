package difftest

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
)

// Value is one parsed RESP reply: Kind is its type byte ('+', '-', ':',
// '$', '*', '%', '~', ',', '_', ...), Str its text (nil bulk: Null), Items
// its elements (a map's keys and values alternate).
type Value struct {
	Kind  byte
	Str   string
	Null  bool
	Items []Value
}

// Parse reads one RESP reply from b.
func Parse(b []byte) (Value, error) {
	v, rest, err := parse(b)
	if err == nil && len(rest) != 0 {
		err = errors.New("trailing bytes after the reply")
	}
	return v, err
}

func parse(b []byte) (Value, []byte, error) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return Value{}, nil, errors.New("malformed RESP")
	}
	v := Value{Kind: b[0]}
	line := string(b[1:i])
	b = b[i+2:]
	switch v.Kind {
	case '$', '=', '!':
		n, err := strconv.Atoi(line)
		if err != nil {
			return v, nil, err
		}
		if n < 0 {
			v.Null = true
			return v, b, nil
		}
		if len(b) < n+2 {
			return v, nil, errors.New("short bulk")
		}
		v.Str = string(b[:n])
		return v, b[n+2:], nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(line)
		if err != nil {
			return v, nil, err
		}
		if n < 0 {
			v.Null = true
			return v, b, nil
		}
		if v.Kind == '%' || v.Kind == '|' {
			n *= 2
		}
		v.Items = make([]Value, 0, n)
		for range n {
			var item Value
			if item, b, err = parse(b); err != nil {
				return v, nil, err
			}
			v.Items = append(v.Items, item)
		}
		return v, b, nil
	}
	v.Str = line
	return v, b, nil
}

// Render writes v back as RESP.
func (v Value) Render() string {
	var b []byte
	return string(v.render(b))
}

func (v Value) render(b []byte) []byte {
	b = append(b, v.Kind)
	switch v.Kind {
	case '$', '=', '!':
		if v.Null {
			return append(b, "-1\r\n"...)
		}
		b = strconv.AppendInt(b, int64(len(v.Str)), 10)
		b = append(b, "\r\n"...)
		b = append(b, v.Str...)
		return append(b, "\r\n"...)
	case '*', '~', '>', '%', '|':
		if v.Null {
			return append(b, "-1\r\n"...)
		}
		n := len(v.Items)
		if v.Kind == '%' || v.Kind == '|' {
			n /= 2
		}
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, "\r\n"...)
		for _, item := range v.Items {
			b = item.render(b)
		}
		return b
	}
	b = append(b, v.Str...)
	return append(b, "\r\n"...)
}

// SortItems puts v's elements in byte order of their rendering, in groups
// of group (2 for field/value pairs), for replies whose order Redis leaves
// to its hash tables.
func (v *Value) SortItems(group int) {
	if len(v.Items)%group != 0 {
		return
	}
	groups := make([][]Value, 0, len(v.Items)/group)
	for i := 0; i < len(v.Items); i += group {
		groups = append(groups, v.Items[i:i+group])
	}
	slices.SortFunc(groups, func(a, b []Value) int {
		for k := range a {
			if c := bytes.Compare([]byte(a[k].Render()), []byte(b[k].Render())); c != 0 {
				return c
			}
		}
		return 0
	})
	items := make([]Value, 0, len(v.Items))
	for _, g := range groups {
		items = append(items, g...)
	}
	v.Items = items
}
