-- lockout_extend_v3: extend-only model lockout; the failure count only rises.
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = lockout hash {until, count, reason} (PX = until), KEYS[2] = the connection's index
-- set, KEYS[3] = the connection hash (its version covers the lockouts)
-- ARGV: duration_ms, failure_count, reason, index member ("provider\31model")
-- -> {remaining_ms, count, reason ('' = none), applied 0|1, version}
-- `applied` is 0 when the stored lockout already covered this one (a peer got there first):
-- the caller then publishes nothing, so deliveries do not grow with the square of the nodes.
local cur = redis.call('HMGET', KEYS[1], 'until', 'count', 'reason')
local cur_until = tonumber(cur[1]) or 0
local cur_count = tonumber(cur[2]) or 0
local proposed = now + tonumber(ARGV[1])
local new_until = math.max(cur_until, proposed)
local count = math.max(cur_count, tonumber(ARGV[2]))
local reason = cur[3] or ARGV[3]
if proposed >= cur_until then reason = ARGV[3] end
if new_until <= now then
  return {0, cur_count, cur[3] or '', 0, version(KEYS[3])}
end
if new_until == cur_until and count == cur_count and reason == cur[3] then
  return {cur_until - now, cur_count, reason, 0, version(KEYS[3])}
end
redis.call('HSET', KEYS[1], 'until', new_until, 'count', count, 'reason', reason)
redis.call('PEXPIREAT', KEYS[1], new_until)
redis.call('SADD', KEYS[2], ARGV[4])
-- The index lives as long as its longest lockout, so an idle connection leaves nothing behind.
if redis.call('PTTL', KEYS[2]) < new_until - now then
  redis.call('PEXPIREAT', KEYS[2], new_until)
end
local ver = bump(KEYS[3])
retain(KEYS[3], new_until)
return {new_until - now, count, reason, 1, ver}
