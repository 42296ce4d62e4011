-- breaker_failure_v2: one failure of an attempt admitted while CLOSED/DEGRADED.
-- CLOSED/DEGRADED count it: OPEN at the threshold, else CLOSED -> DEGRADED at the band. OPEN
-- counts it without moving the open window; HALF_OPEN ignores it (only a probe result moves it).
-- KEYS: breaker, v1 failures, probe. ARGV: threshold, band, reset_ms, max_reset_ms, escalation
local s = snapshot(KEYS[1])
local before = s.phase
refresh(KEYS[1], s)
local quiet = math.max(tonumber(ARGV[4]), tonumber(ARGV[3]))
if s.phase == 'closed' or s.phase == 'degraded' then
  count_failure(KEYS[1], s, quiet)
  -- Kept for the success script, which has no parameters.
  redis.call('HSET', KEYS[1], 'band', ARGV[2])
  if s.failures >= tonumber(ARGV[1]) then
    open(KEYS[1], s, open_timeout(s.cycles, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])))
  elseif s.phase == 'closed' and s.failures >= tonumber(ARGV[2]) then
    transition(KEYS[1], s, 'degraded')
  end
elseif s.phase == 'open' then
  count_failure(KEYS[1], s, quiet)
end
return reply(before, s, KEYS[3])
