-- Operator revoke: drops the lease whoever holds it. The fence counter is left alone, so the
-- revoked holder's generation is stale for good.
-- KEYS[1] = lease hash   Returns 1 when a lease was dropped, 0 when there was none.
return redis.call('DEL', KEYS[1])
