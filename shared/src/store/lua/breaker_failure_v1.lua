-- breaker_failure_v1: count a failure in the window; CLOSED -> OPEN at the threshold.
-- KEYS: breaker, failures, probe. ARGV: threshold, window_ms, reset_timeout_ms, max_reset_timeout_ms
local s = snapshot(KEYS[1], KEYS[2], KEYS[3])
if s.phase ~= 'closed' then
  -- OPEN and HALF_OPEN ignore ordinary failures: only a probe result moves them.
  return {s.phase, s.phase, s.gen, s.failures, s.retry, s.cycles}
end
local window = tonumber(ARGV[2])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[1], 'phase', 'closed', 'window', window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('ZADD', KEYS[2], now, now .. ':' .. seq)
redis.call('PEXPIRE', KEYS[2], window)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[1]) then
  open(KEYS[1], KEYS[2], s.cycles, tonumber(ARGV[3]), tonumber(ARGV[4]))
end
return reply('closed', KEYS[1], KEYS[2], KEYS[3])
