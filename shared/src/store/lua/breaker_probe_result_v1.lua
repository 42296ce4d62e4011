-- breaker_probe_result_v1: the fenced probe's outcome. success -> CLOSED (cycles reset);
-- failure -> OPEN with the escalated timeout. A stale generation (an expired or replaced
-- probe) changes nothing.
-- KEYS: breaker, failures, probe. ARGV: generation, success 1|0, reset_timeout_ms, max_reset_timeout_ms
-- -> {} when stale, else the usual breaker reply
local s = snapshot(KEYS[1], KEYS[2], KEYS[3])
local gen = redis.call('HGET', KEYS[3], 'gen')
if s.phase ~= 'half_open' or gen ~= ARGV[1] then
  return {}
end
redis.call('DEL', KEYS[3])
if ARGV[2] == '1' then
  close(KEYS[1], KEYS[2])
else
  open(KEYS[1], KEYS[2], s.cycles, tonumber(ARGV[3]), tonumber(ARGV[4]))
end
return reply('half_open', KEYS[1], KEYS[2], KEYS[3])
