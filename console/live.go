package console

// routesLive registers the API of the live pages: the cluster, topics and
// partitions, and the event timeline.
func (s *Server) routesLive() {}
