-- cooldown_extend_v3: extend-only connection cooldown with the thundering-herd guard.
-- The change log key and the connection id come last in KEYS and ARGV (see conn_common).
-- KEYS[1] = connection hash (see conn_common). `at` is when a change was last applied (Redis
-- time), for cooldown_success's staleness test.
-- ARGV: duration_ms, proposed_level, reason, terminal ('' = none), last_error
-- -> {applied 0|1, remaining_ms, level, terminal ('' = none), version}
local cur = redis.call('HMGET', KEYS[1], 'until', 'level', 'terminal')
local cur_until = tonumber(cur[1]) or 0
local cur_level = tonumber(cur[2]) or 0
if cur[3] and cur[3] ~= '' then
  -- Terminal is sticky: a cooldown never overwrites it.
  return {0, math.max(cur_until - now, 0), cur_level, cur[3], version(KEYS[1])}
end
local new_until = math.max(cur_until, now + tonumber(ARGV[1]))
local level = cur_level
if now >= cur_until then
  -- Outside a cooldown window the level may rise; inside one, concurrent failures from
  -- other nodes belong to the same incident and must not raise it again.
  level = math.max(cur_level, tonumber(ARGV[2]))
end
local terminal = ARGV[4]
if new_until == cur_until and level == cur_level and terminal == '' then
  return {0, math.max(cur_until - now, 0), cur_level, '', version(KEYS[1])}
end
redis.call('HSET', KEYS[1], 'until', new_until, 'level', level, 'reason', ARGV[3], 'err', ARGV[5], 'at', now)
if terminal ~= '' then
  redis.call('HSET', KEYS[1], 'terminal', terminal)
end
local ver = bump(KEYS[1])
-- The level must outlive the window, so the hash is kept for a retention period after it.
retain(KEYS[1], new_until)
return {1, math.max(new_until - now, 0), level, terminal, ver}
