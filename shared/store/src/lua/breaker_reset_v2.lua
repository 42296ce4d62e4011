-- breaker_reset_v2: operator reset to CLOSED; drops failures and any probe lease.
-- The fence counter is kept, so an old probe's result stays stale. KEYS: breaker, v1 failures, probe.
local s = snapshot(KEYS[1])
local before = s.phase
redis.call('DEL', KEYS[3])
if s.phase ~= 'closed' or s.cycles ~= 0 then
  close(KEYS[1], KEYS[2], s)
else
  s.failures = 0
  redis.call('HSET', KEYS[1], 'failures', 0)
  redis.call('DEL', KEYS[2])
end
return reply(before, s, KEYS[3])
