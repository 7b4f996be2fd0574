-- throttled/throttled v2.15.0 (Go module github.com/throttled/throttled/v2),
-- store/goredisstore.v9/goredisstore.go: the raw string constant
-- redisCASScript as Go reads it (it begins with the newline after the opening
-- backquote and ends with a newline). CompareAndSwapWithTTL sends it with
-- EVAL every time (go-redis's Eval, never EVALSHA), with the old value, the
-- new one and the TTL in whole seconds (at least 1), all written as integers.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 ebd682e30de074a6919bde872b507734c7c3ebe5).
-- sluice-bench: end of header

local v = redis.call('get', KEYS[1])
if v == false then
  return redis.error_reply("key does not exist")
end
if v ~= ARGV[1] then
  return 0
end
redis.call('setex', KEYS[1], ARGV[3], ARGV[2])
return 1
