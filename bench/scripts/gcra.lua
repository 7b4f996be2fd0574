-- GCRA (generic cell rate algorithm), the Redis peer of Sluice's CL.THROTTLE.
--
-- The logic follows go-redis/redis_rate's allowN script (itself after
-- rwz/redis-gcra): the clock is Redis's own TIME, the key holds the
-- theoretical arrival time (TAT) as a float, and a request is admitted when
-- the TAT it would leave behind is no further ahead of now than the burst
-- tolerance. Arguments and reply follow redis-cell, so that the same
-- workload means the same thing on both servers:
--
--   KEYS[1]  limiter key
--   ARGV     max_burst, count, period (seconds, decimal allowed), cost
--   reply    {limited, limit, remaining, retry_after_ms, reset_after_ms}
--
-- limit = max_burst + 1. A limited request writes nothing.

-- The script reads the clock and then writes, so its effects (not the script)
-- must be replicated. A no-op from Redis 7 on, required before 5.
redis.replicate_commands()

local key = KEYS[1]
local max_burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local limit = max_burst + 1
local interval = period / count        -- seconds per unit at the steady rate
local tolerance = interval * limit     -- how far the TAT may run ahead of now

-- TIME is {seconds, microseconds}. Counting seconds from 2017-01-01 rather
-- than 1970 keeps seconds-with-microseconds inside a double's exact range.
local clock = redis.call('TIME')
local now = (tonumber(clock[1]) - 1483228800) + tonumber(clock[2]) / 1000000

local tat = tonumber(redis.call('GET', key)) or now
if tat < now then
  tat = now
end

local new_tat = tat + interval * cost
local slack = now - (new_tat - tolerance)   -- negative: not enough room yet

local function remaining_for(ttl)
  local r = math.floor((tolerance - ttl) / interval)
  if r < 0 then
    return 0
  end
  return r
end

if slack < 0 then
  local ttl = tat - now
  local retry_ms = math.ceil(-slack * 1000)
  if cost > limit then
    retry_ms = -1   -- can never succeed
  end
  return {1, limit, remaining_for(ttl), retry_ms, math.ceil(ttl * 1000)}
end

local ttl = new_tat - now
local ttl_ms = math.ceil(ttl * 1000)
if ttl_ms > 0 then
  redis.call('SET', key, new_tat, 'PX', ttl_ms)
end
return {0, limit, remaining_for(ttl), -1, ttl_ms}
