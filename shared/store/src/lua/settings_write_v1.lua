-- settings_write_v1: store the settings document and bump its version in one step.
-- KEYS[1] = settings hash {version, doc}; ARGV[1] = doc (JSON) -> the new version
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[1])
return version
