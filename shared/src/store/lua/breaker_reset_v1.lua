-- breaker_reset_v1: operator reset to CLOSED; drops failures and any probe lease.
-- The fence counter is kept, so an old probe's result stays stale. KEYS: breaker, failures, probe.
local s = snapshot(KEYS[1], KEYS[2], KEYS[3])
redis.call('DEL', KEYS[3])
if s.phase ~= 'closed' or s.cycles ~= 0 then
  close(KEYS[1], KEYS[2])
else
  redis.call('DEL', KEYS[2])
end
return reply(s.phase, KEYS[1], KEYS[2], KEYS[3])
