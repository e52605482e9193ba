package zk

// StandbyLoads returns how many Loads of b the standby view served.
func StandbyLoads(b *Backend) uint64 {
	if s := b.currentStandby(); s != nil {
		return s.served.Load()
	}
	return 0
}
