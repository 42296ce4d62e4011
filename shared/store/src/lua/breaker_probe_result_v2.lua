-- breaker_probe_result_v2: the fenced probe's outcome. success -> CLOSED (failures and cycles
-- zeroed); failure -> counted, cycles + 1, OPEN with the escalated timeout. A stale generation
-- (an expired or replaced probe) changes nothing.
-- KEYS: breaker, v1 failures, probe.
-- ARGV: generation, success 1|0, reset_ms, max_reset_ms, escalation
-- -> {} when stale, else the usual breaker reply
local s = snapshot(KEYS[1])
local before = s.phase
refresh(KEYS[1], s)
local gen = redis.call('HGET', KEYS[3], 'gen')
if s.phase ~= 'half_open' or gen ~= ARGV[1] then
  return {}
end
redis.call('DEL', KEYS[3])
if ARGV[2] == '1' then
  close(KEYS[1], KEYS[2], s)
else
  count_failure(KEYS[1], s, math.max(tonumber(ARGV[4]), tonumber(ARGV[3])))
  s.cycles = s.cycles + 1
  open(KEYS[1], s, open_timeout(s.cycles, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])))
end
return reply(before, s, KEYS[3])
