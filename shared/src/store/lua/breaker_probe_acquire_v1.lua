-- breaker_probe_acquire_v1: one fenced half-open probe cluster-wide.
-- KEYS: breaker, failures, probe, fence. ARGV: owner, ttl_ms
-- -> {1, generation, ttl_ms} granted | {0, retry_after_ms} denied
local s = snapshot(KEYS[1], KEYS[2], KEYS[3])
if s.phase == 'open' then
  if now < s.open_until then
    return {0, s.open_until - now}
  end
elseif s.phase == 'half_open' then
  local pttl = redis.call('PTTL', KEYS[3])
  -- A probe lease always has a TTL; only a live one blocks (a missing TTL must not wedge it).
  if pttl > 0 then
    return {0, math.max(pttl, 0)}
  end
else
  -- CLOSED: no probe is needed; retry_after 0 means "send normally".
  return {0, 0}
end
local gen = redis.call('INCR', KEYS[4])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'gen', gen)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if s.phase ~= 'half_open' then
  redis.call('HSET', KEYS[1], 'phase', 'half_open')
  redis.call('HINCRBY', KEYS[1], 'gen', 1)
end
return {1, gen, tonumber(ARGV[2])}
