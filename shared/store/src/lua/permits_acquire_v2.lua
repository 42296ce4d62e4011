-- Cluster-wide max_concurrent as a quota lease: each node leases a block of permits.
-- KEYS[1] = ZSET node -> expiry (Redis ms)   KEYS[2] = HASH node -> granted permits
-- ARGV[1] = node id   ARGV[2] = permits wanted   ARGV[3] = cap   ARGV[4] = ttl ms
-- Returns {granted, run_id}: the permits granted to this node (0 <= granted <= wanted, and the
-- live grants of all nodes never sum above the cap), and the run id of the server that holds
-- them. A new run id means a restart or a failover, which may have lost the last grants: the
-- node then re-asserts what it holds before it grows (v2; v1 returned the grant alone).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])

-- Purge nodes whose lease expired (a dead node's permits come back here).
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, node in ipairs(expired) do
  redis.call('HDEL', KEYS[2], node)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)

-- Sum the live grants of the other nodes; drop grants without a live expiry.
local others = 0
local grants = redis.call('HGETALL', KEYS[2])
for i = 1, #grants, 2 do
  local node = grants[i]
  if node ~= ARGV[1] then
    if redis.call('ZSCORE', KEYS[1], node) then
      others = others + (tonumber(grants[i + 1]) or 0)
    else
      redis.call('HDEL', KEYS[2], node)
    end
  end
end

local granted = cap - others
if granted > want then granted = want end
if granted < 0 then granted = 0 end

if granted > 0 then
  redis.call('HSET', KEYS[2], ARGV[1], granted)
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
else
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
end

-- Both keys live as long as the longest live grant, so idle connections leave nothing behind.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  local at = tonumber(last[2]) + 1000
  redis.call('PEXPIREAT', KEYS[1], at)
  redis.call('PEXPIREAT', KEYS[2], at)
else
  redis.call('DEL', KEYS[1], KEYS[2])
end
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
return {granted, run_id}
