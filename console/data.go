package console

// routesData registers the API of the data pages: messages and consumer
// groups.
func (s *Server) routesData() {}
