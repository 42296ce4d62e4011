-- lockout_clear_v2: remove lockouts and their index members.
-- KEYS[1] = connection hash, KEYS[2] = index set, KEYS[3..n] = lockout hashes;
-- ARGV[i] = the index member of KEYS[i+2] -> {how many lockout keys existed, version}
local removed = 0
for i = 3, #KEYS do
  removed = removed + redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[2], ARGV[i - 2])
end
if removed == 0 then
  return {0, version(KEYS[1])}
end
local ver = bump(KEYS[1])
retain(KEYS[1], now)
return {removed, ver}
