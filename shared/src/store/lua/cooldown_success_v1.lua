-- cooldown_success_v1: a success ends the cooldown and lowers the backoff level by one.
-- KEYS[1] = connection hash. No-op on a terminal connection.
-- ARGV[1] = when the successful attempt was dispatched (epoch ms, the node's clock; absent or
-- 0 = unknown). A success of an attempt older than the last applied failure (`at`, from any
-- node) is stale and changes nothing: it says nothing about the connection since then.
-- -> {remaining_ms, level, reason ('' = none), terminal ('' = none), eased (1 = this success
--     ended a running cooldown, which the caller announces to the other nodes; else 0)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'until', 'level', 'reason', 'terminal')
local cur_until = tonumber(cur[1]) or 0
local cur_level = tonumber(cur[2]) or 0
if cur[4] and cur[4] ~= '' then
  return {math.max(cur_until - now, 0), cur_level, cur[3] or '', cur[4], 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0, '', '', 0}
end
local started = tonumber(ARGV[1]) or 0
local failed_at = tonumber(redis.call('HGET', KEYS[1], 'at')) or 0
if started > 0 and failed_at > started then
  return {math.max(cur_until - now, 0), cur_level, cur[3] or '', '', 0}
end
local eased = 0
if cur_until > now then
  eased = 1
end
local level = math.max(cur_level - 1, 0)
if level == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HDEL', KEYS[1], 'until', 'reason', 'err')
  redis.call('HSET', KEYS[1], 'level', level)
end
return {0, level, '', '', eased}
