package etcd

// StandbyLoads returns how many Loads of b the standby view served.
func StandbyLoads(b *Backend) uint64 {
	if s := b.standby.Load(); s != nil {
		return s.served.Load()
	}
	return 0
}
