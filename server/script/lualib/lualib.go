// Package lualib is the Lua libraries Redis gives scripts beyond Lua's
// own: cjson, struct, bit and cmsgpack, as gopher-lua modules that behave
// as Redis 7's do.
package lualib

import lua "github.com/yuin/gopher-lua"

// Open installs cjson, struct, bit and cmsgpack as globals in L, as Redis
// does (to come).
func Open(L *lua.LState) {}
