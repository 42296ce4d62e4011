-- lockout_clear_v1: remove lockouts and their index members.
-- KEYS[1] = index set, KEYS[2..n] = lockout hashes; ARGV[i] = the index member of KEYS[i+1]
-- -> how many lockout keys existed
local removed = 0
for i = 2, #KEYS do
  removed = removed + redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[1], ARGV[i - 1])
end
return removed
