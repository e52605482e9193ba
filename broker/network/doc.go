// Package network is tripod's connection layer, Kafka's SocketServer: it
// accepts the Kafka listeners' connections within max.connections and
// max.connections.per.ip (connlimit.go); reads request frames within
// socket.request.max.bytes, sasl.server.max.receive.size and the shared
// request pool, queued.max.request.bytes (request_pool.go); admits a
// frame's api key before an unauthenticated connection's body is read;
// mutes a connection whose answers are not being read (connFlow); and
// writes the answers in request order from pooled frames (frames.go). It
// also holds the walk that bounds what decoding a request may allocate
// (DecodeCost, request_cost.go), which the broker runs before decoding.
//
// It owns no API: a Handler (the broker, one per listener) opens each
// connection (its TLS handshake and principal), decodes, authorizes and
// answers its requests, and says through Conn what the connection may
// send. The package must not import the broker, nor interpret a frame
// beyond its size and api key; what a request means, who may send it and
// how it is answered are the Handler's.
package network
