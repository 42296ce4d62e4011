-- breaker_success_v1: a success while CLOSED clears the failure window; OPEN/HALF_OPEN ignore it
-- (only a probe result closes them). KEYS: breaker, failures, probe.
local s = snapshot(KEYS[1], KEYS[2], KEYS[3])
if s.phase == 'closed' then
  redis.call('DEL', KEYS[2])
end
return reply(s.phase, KEYS[1], KEYS[2], KEYS[3])
