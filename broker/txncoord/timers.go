package txncoord

import "time"

// timerLoop aborts the transactions past their timeout every
// AbortTimedOutInterval and removes the expired transactional ids every
// RemoveExpiredInterval, until Close.
func (c *Coordinator) timerLoop() {
	abort := time.NewTicker(c.cfg.AbortTimedOutInterval)
	defer abort.Stop()
	expire := time.NewTicker(c.cfg.RemoveExpiredInterval)
	defer expire.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-abort.C:
			c.AbortTimedOut()
		case <-expire.C:
			c.RemoveExpired()
		}
	}
}

// AbortTimedOut fences the producer of every open transaction past its
// transaction.timeout.ms and aborts it (Kafka's
// abortTimedOutTransactions); it returns how many it began to abort.
func (c *Coordinator) AbortTimedOut() int {
	shards, _ := c.allShards()
	n := 0
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			now := c.nowMs()
			for id, m := range sh.txns {
				if !m.TimedOut(now) {
					continue
				}
				t, err := m.PrepareFenceAndAbort(now)
				if err != nil {
					c.illegal(id, err)
					continue
				}
				c.logger.Info("aborting a transaction past its timeout", "transactional_id", id, "producer_id", m.ProducerID,
					"timeout_ms", m.TimeoutMs, "started_ms", m.StartMs)
				wait := c.store(sh, m, t)
				n++
				c.timedOut.Add(1)
				c.goroutine(func() {
					if c.finish(sh, m, t, wait()) == 0 {
						c.writeMarkers(sh, m)
					}
				})
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// RemoveExpired removes every transactional id with no open transaction
// unchanged for transactional.id.expiration.ms, storing its tombstone
// (Kafka's removeExpiredTransactionalIds); it returns how many it began
// to remove.
func (c *Coordinator) RemoveExpired() int {
	shards, _ := c.allShards()
	n := 0
	for _, sh := range shards {
		sh.mu.Lock()
		if sh.state == shardActive {
			now := c.nowMs()
			for id, m := range sh.txns {
				if !m.Expired(c.cfg.Limits, now) {
					continue
				}
				t, err := m.PrepareDead()
				if err != nil {
					c.illegal(id, err)
					continue
				}
				wait := c.store(sh, m, t)
				n++
				c.goroutine(func() {
					if code := c.finish(sh, m, t, wait()); code != 0 {
						c.logger.Warn("removal of an expired transactional id failed; retried at the next check", "transactional_id", id, "code", code)
					}
				})
			}
		}
		sh.mu.Unlock()
	}
	return n
}
