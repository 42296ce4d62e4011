-- Returns a node's permits at once (clean shutdown), instead of waiting for its TTL.
-- KEYS[1] = ZSET node -> expiry   KEYS[2] = HASH node -> granted   ARGV[1] = node id
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
