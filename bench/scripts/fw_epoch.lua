-- Fixed window counter on windows aligned to multiples of the window since
-- the Unix epoch (as FW.CHECK aligns them): the tutorial limiter, one
-- counter key per window named after the window's index, INCRBY and then
-- PEXPIRE, in one script. Used by the experiments; the load generator's
-- lua-fw starts its window at a key's first request instead.
--
--   KEYS[1]  key prefix; the counter is KEYS[1]..':'..index (derived in the
--            script, so standalone Redis only)
--   ARGV     limit, window (seconds, decimal allowed), cost, [now_ms]
--            now_ms, when given, replaces Redis's clock: the experiments'
--            emulated clock, never sent by the load generator
--   reply    {limited, limit, remaining, retry_after_ms, reset_after_ms}
--
-- As in the classic, a limited request is still counted.

-- Reads the clock, then writes: replicate effects, not the script.
redis.replicate_commands()

local limit = tonumber(ARGV[1])
local window_ms = math.floor(tonumber(ARGV[2]) * 1000)
local cost = tonumber(ARGV[3])

local now_ms = tonumber(ARGV[4])
if not now_ms then
  local clock = redis.call('TIME')
  now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
local index = math.floor(now_ms / window_ms)
local reset_ms = (index + 1) * window_ms - now_ms

local key = KEYS[1] .. ':' .. string.format('%d', index)
local n = redis.call('INCRBY', key, cost)
if n == cost then
  redis.call('PEXPIRE', key, window_ms)
end
if n > limit then
  return {1, limit, 0, reset_ms, reset_ms}
end
return {0, limit, limit - n, -1, reset_ms}
