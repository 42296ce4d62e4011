-- lockout_extend_v1: extend-only model lockout; the failure count only rises.
-- KEYS[1] = lockout hash {until, count, reason} (PX = until), KEYS[2] = the connection's index set
-- ARGV: duration_ms, failure_count, reason, index member ("provider\31model")
-- -> {remaining_ms, count, reason ('' = none)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'until', 'count', 'reason')
local cur_until = tonumber(cur[1]) or 0
local cur_count = tonumber(cur[2]) or 0
local proposed = now + tonumber(ARGV[1])
local new_until = math.max(cur_until, proposed)
local count = math.max(cur_count, tonumber(ARGV[2]))
local reason = cur[3] or ARGV[3]
if proposed >= cur_until then reason = ARGV[3] end
if new_until <= now then
  return {0, cur_count, cur[3] or ''}
end
redis.call('HSET', KEYS[1], 'until', new_until, 'count', count, 'reason', reason)
redis.call('PEXPIREAT', KEYS[1], new_until)
redis.call('SADD', KEYS[2], ARGV[4])
-- The index lives as long as its longest lockout, so an idle connection leaves nothing behind.
if redis.call('PTTL', KEYS[2]) < new_until - now then
  redis.call('PEXPIREAT', KEYS[2], new_until)
end
return {new_until - now, count, reason}
