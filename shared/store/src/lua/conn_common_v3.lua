-- conn_common_v3: prelude shared by the connection-record scripts (prepended at build time).
-- A connection record is the connection hash {until, level, reason, terminal, err, at, ver} plus
-- the connection's lockouts. Every write that changes it, clears included, bumps `ver`, so a
-- node's resync can adopt Redis's record whenever Redis's version is newer, lowering as well as
-- raising. A clear keeps the hash as a tombstone {ver} (with the retention expiry) instead of
-- deleting it, so the version survives the clear.
-- Every bump is also appended to the change log, a bounded stream of {c = connection id,
-- v = version} that nodes read from their last offset instead of re-reading every record
-- (store::changelog). Calling convention of every script with this prelude: the LAST key is the
-- change log stream (built by the caller from the key prefix, so it routes in Redis Cluster)
-- and the LAST argument is the connection id.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- connections::LEVEL_RETENTION_MS: how long a record outlives its cooldown.
local RETENTION_MS = 86400000
-- changelog::CHANGELOG_MAXLEN: approximate bound of the change log (`MAXLEN ~`).
local CHANGELOG_MAXLEN = 100000
local CHANGELOG = KEYS[#KEYS]
local CONN_ID = ARGV[#ARGV]

-- Versions are above every earlier version of the record and at least the Redis clock in
-- microseconds, so a record written again after its hash expired still gets a newer version.
local function bump(ckey)
  local cur = tonumber(redis.call('HGET', ckey, 'ver')) or 0
  local ver = math.max(cur + 1, now * 1000)
  local v = string.format('%.0f', ver)
  redis.call('HSET', ckey, 'ver', v)
  redis.call('XADD', CHANGELOG, 'MAXLEN', '~', CHANGELOG_MAXLEN, '*', 'c', CONN_ID, 'v', v)
  return ver
end

local function version(ckey)
  return tonumber(redis.call('HGET', ckey, 'ver')) or 0
end

-- A non-terminal record lives until `until_ms` plus the retention; a terminal one has no TTL.
local function retain(ckey, until_ms)
  local terminal = redis.call('HGET', ckey, 'terminal')
  if terminal and terminal ~= '' then
    redis.call('PERSIST', ckey)
    return
  end
  local want = math.max(until_ms, now) + RETENTION_MS
  local pttl = redis.call('PTTL', ckey)
  if pttl < 0 or pttl < want - now then
    redis.call('PEXPIREAT', ckey, want)
  end
end
