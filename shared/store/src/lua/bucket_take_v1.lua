-- Token bucket on the Redis clock: capacity = requests per minute, refilled continuously at
-- rpm / 60000 tokens per ms. Takes one token or none (all-or-nothing).
-- KEYS[1] = bucket hash {tokens, ts}   ARGV[1] = requests per minute (> 0)
-- Returns {1, tokens left (floored)} or {0, ms until one token is back}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local rate = cap / 60000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1])
local ts = tonumber(v[2])
if not tokens or not ts then
  tokens = cap
  ts = now
end
-- A clock that went backwards refills nothing.
if now > ts then
  tokens = tokens + (now - ts) * rate
  ts = now
end
if tokens > cap then tokens = cap end
if tokens >= 1 then
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', ts)
  -- Once full again the bucket equals a missing key, so let it expire then.
  redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) / rate) + 1000)
  return {1, math.floor(tokens)}
end
local wait = math.ceil((1 - tokens) / rate)
if wait < 1 then wait = 1 end
return {0, wait}
