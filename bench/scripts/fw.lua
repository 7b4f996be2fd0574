-- Fixed window counter, the Redis peer of Sluice's FW.CHECK: the classic
-- INCRBY, plus PEXPIRE when the increment created the key, in one script so
-- that the two cannot be separated (a counter left without its expiry would
-- limit forever).
--
-- As in the classic, the window starts at a key's first request (not at an
-- epoch multiple, as FW.CHECK's does), and a limited request is still
-- counted.
--
--   KEYS[1]  counter key
--   ARGV     limit, window (seconds, decimal allowed), cost
--   reply    {limited, limit, remaining, retry_after_ms, reset_after_ms}

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window_ms = math.floor(tonumber(ARGV[2]) * 1000)
local cost = tonumber(ARGV[3])

local n = redis.call('INCRBY', key, cost)
if n == cost then
  redis.call('PEXPIRE', key, window_ms)
end
local ttl = redis.call('PTTL', key)
if n > limit then
  return {1, limit, 0, ttl, ttl}
end
return {0, limit, limit - n, -1, ttl}
