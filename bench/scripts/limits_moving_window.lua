-- limits 2.8.0 (Python; Debian's python3-limits 2.8.0-1), the file
-- limits/resources/redis/lua_scripts/moving_window.lua as installed
-- (/usr/lib/python3/dist-packages), byte for byte, its final newline
-- included. limits/storage/redis.py reads it as bytes (get_package_data:
-- pkg_resources.resource_string) and RedisStorage registers it with
-- redis-py's register_script (python3-redis 4.3.4). get_moving_window
-- (MovingWindowRateLimiter.test and get_window_stats), with ARGV
-- int(time.time() - expiry) and limit,
-- sends EVALSHA of these bytes' SHA1; on NOSCRIPT, redis-py sends SCRIPT
-- LOAD of the text, then the EVALSHA again. It never sends EVAL.
-- This header is not sent: everything after the marker line below is, byte
-- for byte (SHA1 3136f0028c572d2959b5cdc5ec15b287fab6a9ff).
-- sluice-bench: end of header
local items = redis.call('lrange', KEYS[1], 0, tonumber(ARGV[2]))
local expiry = tonumber(ARGV[1])
local a = 0
local oldest = nil

for idx=1,#items do
    if tonumber(items[idx]) >= expiry then
        a = a + 1

        if oldest == nil then
            oldest = tonumber(items[idx])
        end
    else
        break
    end
end

return {oldest, a}
