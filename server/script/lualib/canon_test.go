package lualib_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Canonical forms that forget the order of members: gopher-lua iterates a
// table's keys in insertion order, Lua 5.1 in its hash layout's order, so
// an encoded object or map may list the same members differently.

var errCanon = errors.New("not canonicalisable")

// canonJSON canonicalises cjson output (possibly several texts separated
// by spaces): objects' members sorted.
func canonJSON(s string) (string, error) {
	var out []string
	for s != "" {
		v, rest, err := canonJSONValue(s)
		if err != nil {
			return "", err
		}
		out = append(out, v)
		s = strings.TrimPrefix(rest, " ")
	}
	return strings.Join(out, " "), nil
}

func canonJSONValue(s string) (string, string, error) {
	if s == "" {
		return "", "", errCanon
	}
	switch s[0] {
	case '"':
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				return s[:i+1], s[i+1:], nil
			}
		}
		return "", "", errCanon
	case '[', '{':
		open, close := s[0], byte(']')
		if open == '{' {
			close = '}'
		}
		s = s[1:]
		var items []string
		for {
			if s != "" && s[0] == close {
				break
			}
			var item string
			if open == '{' {
				k, rest, err := canonJSONValue(s)
				if err != nil || rest == "" || rest[0] != ':' {
					return "", "", errCanon
				}
				v, rest2, err := canonJSONValue(rest[1:])
				if err != nil {
					return "", "", err
				}
				item, s = k+":"+v, rest2
			} else {
				v, rest, err := canonJSONValue(s)
				if err != nil {
					return "", "", err
				}
				item, s = v, rest
			}
			items = append(items, item)
			if s != "" && s[0] == ',' {
				s = s[1:]
			}
		}
		if open == '{' {
			sort.Strings(items)
		}
		return string(open) + strings.Join(items, ",") + string(close), s[1:], nil
	}
	i := 0
	for i < len(s) && !strings.ContainsRune(",:]} ", rune(s[i])) {
		i++
	}
	if i == 0 {
		return "", "", errCanon
	}
	return s[:i], s[i:], nil
}

// canonHexMsgpack canonicalises hex-encoded MessagePack streams separated
// by spaces: maps' entries sorted by their encoding.
func canonHexMsgpack(s string) (string, error) {
	var out []string
	for _, part := range strings.Split(s, " ") {
		b, err := hex.DecodeString(part)
		if err != nil {
			return "", err
		}
		var c []byte
		for len(b) > 0 {
			var v []byte
			v, b, err = canonMsgpack(b)
			if err != nil {
				return "", err
			}
			c = append(c, v...)
		}
		out = append(out, hex.EncodeToString(c))
	}
	return strings.Join(out, " "), nil
}

func canonMsgpack(b []byte) ([]byte, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errCanon
	}
	c := b[0]
	fixed := func(n int) ([]byte, []byte, error) {
		if len(b) < n {
			return nil, nil, errCanon
		}
		return b[:n], b[n:], nil
	}
	be := func(off, n int) int {
		v := 0
		for i := 0; i < n; i++ {
			v = v<<8 | int(b[off+i])
		}
		return v
	}
	container := func(hdr, n int, isMap bool) ([]byte, []byte, error) {
		if len(b) < hdr {
			return nil, nil, errCanon
		}
		head, rest := b[:hdr], b[hdr:]
		var items [][]byte
		for i := 0; i < n; i++ {
			var item []byte
			for j := 0; j < 1+btoi(isMap); j++ {
				v, r, err := canonMsgpack(rest)
				if err != nil {
					return nil, nil, err
				}
				item, rest = append(item, v...), r
			}
			items = append(items, item)
		}
		if isMap {
			sort.Slice(items, func(i, j int) bool { return bytes.Compare(items[i], items[j]) < 0 })
		}
		return append(append([]byte{}, head...), bytes.Join(items, nil)...), rest, nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return fixed(1)
	case c == 0xcc || c == 0xd0:
		return fixed(2)
	case c == 0xcd || c == 0xd1:
		return fixed(3)
	case c == 0xce || c == 0xd2 || c == 0xca:
		return fixed(5)
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		return fixed(9)
	case c&0xe0 == 0xa0:
		return fixed(1 + int(c&0x1f))
	case c == 0xd9 && len(b) >= 2:
		return fixed(2 + be(1, 1))
	case c == 0xda && len(b) >= 3:
		return fixed(3 + be(1, 2))
	case c == 0xdb && len(b) >= 5:
		return fixed(5 + be(1, 4))
	case c&0xf0 == 0x90:
		return container(1, int(c&0xf), false)
	case c&0xf0 == 0x80:
		return container(1, int(c&0xf), true)
	case c == 0xdc && len(b) >= 3:
		return container(3, be(1, 2), false)
	case c == 0xdd && len(b) >= 5:
		return container(5, be(1, 4), false)
	case c == 0xde && len(b) >= 3:
		return container(3, be(1, 2), true)
	case c == 0xdf && len(b) >= 5:
		return container(5, be(1, 4), true)
	}
	return nil, nil, fmt.Errorf("%w: byte %#x", errCanon, c)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
