-- lockout_clear_v3: remove lockouts and their index members.
-- KEYS[1] = connection hash, KEYS[2] = index set, KEYS[3..n-1] = lockout hashes, KEYS[n] = the
-- change log; ARGV[i] = the index member of KEYS[i+2], ARGV[last] = the connection id
-- -> {how many lockout keys existed, version}
local removed = 0
for i = 3, #KEYS - 1 do
  removed = removed + redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[2], ARGV[i - 2])
end
if removed == 0 then
  return {0, version(KEYS[1])}
end
local ver = bump(KEYS[1])
retain(KEYS[1], now)
return {removed, ver}
