-- settings_write_cas_v1: store the settings document only if the stored version is still the
-- one the writer based its change on (compare-and-set), bumping the version in the same step.
-- KEYS[1] = settings hash {version, doc}; ARGV[1] = expected version (0 = none yet),
-- ARGV[2] = doc (JSON) -> {1, new version} written | {0, stored version} refused
local cur = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
if cur ~= tonumber(ARGV[1]) then
  return {0, cur}
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[2])
return {1, version}
