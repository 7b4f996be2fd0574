-- The two-key fixed window of the reset-race experiment (a counter and its
-- reset time, unix ms, in two keys) as one script: read the reset, roll the
-- window over if it has passed, increment. Nothing can run in between, so
-- concurrent requests cannot both roll the same window over.
--
--   KEYS[1]  counter
--   KEYS[2]  reset time, unix ms
--   ARGV     window (ms)
--   reply    the counter after the increment (allowed when <= the limit)

-- Reads the clock, then writes: replicate effects, not the script.
redis.replicate_commands()

local window_ms = tonumber(ARGV[1])
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local reset = tonumber(redis.call('GET', KEYS[2]))
if not reset or reset <= now_ms then
  redis.call('SET', KEYS[1], 0)
  redis.call('SET', KEYS[2], string.format('%d', now_ms + window_ms))
end
return redis.call('INCR', KEYS[1])
