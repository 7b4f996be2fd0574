-- Sliding window counter, the Redis peer of Sluice's SW.CHECK.
--
-- Two counters: the current fixed window and the previous one, each in its
-- own key named after the window's index since the Unix epoch. The estimate
-- is prev * (1 - elapsed/window) + cur, as SPEC.md defines it, on Redis's
-- own clock (TIME). A limited request writes nothing.
--
--   KEYS[1]  limiter key; the counters are KEYS[1]..':'..index. They are
--            derived inside the script, so this runs on standalone Redis
--            only (a cluster would refuse undeclared keys).
--   ARGV     limit, window (seconds, decimal allowed), cost, [now_ms]
--            now_ms, when given, replaces Redis's clock: the experiments'
--            emulated clock, never sent by the load generator
--   reply    {limited, limit, remaining, retry_after_ms, reset_after_ms}

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
local elapsed = now_ms - index * window_ms

local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
local counts = redis.call('MGET', cur_key, prev_key)
local cur = tonumber(counts[1]) or 0
local prev = tonumber(counts[2]) or 0

local estimate = prev * (window_ms - elapsed) / window_ms + cur

-- Time until the estimate reaches 0: the previous window's share is gone at
-- the end of this window; this window's count then decays over the next one.
local function reset_ms(c, p)
  if c > 0 then
    return (window_ms - elapsed) + window_ms
  elseif p > 0 then
    return window_ms - elapsed
  end
  return 0
end

if estimate + cost > limit then
  local retry
  if cost > limit then
    retry = -1
  elseif cur + cost <= limit then
    -- Still in this window, once enough of prev has slid out.
    local need = 1 - (limit - cost - cur) / prev
    retry = math.ceil(need * window_ms) - elapsed
  else
    -- In the next window, once enough of this window's count has slid out.
    local need = 1 - (limit - cost) / cur
    retry = (window_ms - elapsed) + math.ceil(need * window_ms)
  end
  if retry == 0 then
    retry = 1
  end
  local left = math.floor(limit - estimate)
  if left < 0 then
    left = 0
  end
  return {1, limit, left, retry, reset_ms(cur, prev)}
end

redis.call('INCRBY', cur_key, cost)
-- The counter must outlive its own window to serve as the next one's prev.
redis.call('PEXPIRE', cur_key, 2 * window_ms)
return {0, limit, math.floor(limit - estimate - cost), -1, reset_ms(cur + cost, prev)}
