-- cooldown_success_v3: a success ends the cooldown and lowers the backoff level by one.
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = connection hash. No-op on a terminal connection.
-- ARGV[1] = how long ago the successful attempt was dispatched, in ms, measured by the node on
-- its own clock ('' = unknown). Only a duration crosses the wire: the dispatch instant is
-- placed on the Redis clock here (now - age), so a node whose wall clock runs ahead cannot make
-- an old attempt look newer than a peer's fresh failure. A success of an attempt dispatched
-- before the last applied failure (`at`, from any node) is stale and changes nothing.
-- -> {remaining_ms, level, reason ('' = none), terminal ('' = none), eased (1 = this success
--     ended a running cooldown, which the caller announces to the other nodes; else 0), version}
local cur = redis.call('HMGET', KEYS[1], 'until', 'level', 'reason', 'terminal', 'at')
local cur_until = tonumber(cur[1]) or 0
local cur_level = tonumber(cur[2]) or 0
if cur[4] and cur[4] ~= '' then
  return {math.max(cur_until - now, 0), cur_level, cur[3] or '', cur[4], 0, version(KEYS[1])}
end
if not cur[1] and not cur[2] then
  -- No cooldown and no level (absent, or a tombstone): nothing to lower.
  return {0, 0, '', '', 0, version(KEYS[1])}
end
local age = tonumber(ARGV[1])
local failed_at = tonumber(cur[5]) or 0
if age and failed_at > now - age then
  return {math.max(cur_until - now, 0), cur_level, cur[3] or '', '', 0, version(KEYS[1])}
end
local eased = 0
if cur_until > now then
  eased = 1
end
local level = math.max(cur_level - 1, 0)
redis.call('HDEL', KEYS[1], 'until', 'reason', 'err')
if level == 0 then
  redis.call('HDEL', KEYS[1], 'level', 'at')
else
  redis.call('HSET', KEYS[1], 'level', level)
end
local ver = bump(KEYS[1])
retain(KEYS[1], now)
return {0, level, '', '', eased, ver}
