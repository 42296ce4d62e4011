-- breaker_probe_acquire_v2: one fenced half-open probe cluster-wide.
-- KEYS: breaker, v1 failures, probe, fence. ARGV: owner, ttl_ms
-- -> {1, generation, ttl_ms, now} granted | {0, retry_after_ms, now} denied
local s = snapshot(KEYS[1])
refresh(KEYS[1], s)
if s.phase == 'open' then
  return {0, s.open_until - now, now}
elseif s.phase ~= 'half_open' then
  -- CLOSED/DEGRADED: no probe is needed; retry_after 0 means "send normally".
  return {0, 0, now}
end
local pttl = redis.call('PTTL', KEYS[3])
-- A probe lease always has a TTL; only a live one blocks (a missing TTL must not wedge it).
if pttl > 0 then
  return {0, pttl, now}
end
local gen = redis.call('INCR', KEYS[4])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'gen', gen)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return {1, gen, tonumber(ARGV[2]), now}
