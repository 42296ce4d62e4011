-- breaker_success_v2: one success of an attempt admitted while CLOSED/DEGRADED takes one failure
-- off the count (never the whole count); DEGRADED -> CLOSED once the count is back within the
-- band. OPEN/HALF_OPEN ignore it: only a probe result closes them.
-- KEYS: breaker, v1 failures, probe.
local s = snapshot(KEYS[1])
local before = s.phase
refresh(KEYS[1], s)
if s.phase == 'closed' or s.phase == 'degraded' then
  if s.failures > 0 then
    s.failures = redis.call('HINCRBY', KEYS[1], 'failures', -1)
  end
  if s.phase == 'degraded' and s.failures <= s.band then
    transition(KEYS[1], s, 'closed')
  end
end
return reply(before, s, KEYS[3])
