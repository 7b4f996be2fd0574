-- ulule/limiter v3.11.2 (Go module github.com/ulule/limiter/v3),
-- drivers/store/redis/store.go: the raw string constant luaPeekScript as Go
-- reads it (it begins with the newline after the opening backquote and ends
-- with a newline; its indents are tabs). NewStoreWithOptions SCRIPT LOADs it
-- (after luaIncrScript) when the store is made; Peek sends EVALSHA with no
-- arguments and, on NOSCRIPT, loads both scripts again and repeats it.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 566f5c6a17e5fddb9a10bf389f754edd0d899c61).
-- sluice-bench: end of header

local key = KEYS[1]
local v = redis.call("get", key)
if v == false then
	return {0, 0}
end
local ttl = redis.call("pttl", key)
return {tonumber(v), ttl}
