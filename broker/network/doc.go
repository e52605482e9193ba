// Package network is tripod's connection layer, Kafka's SocketServer: it
// accepts the Kafka listeners' connections within max.connections and
// max.connections.per.ip, reads request frames within
// socket.request.max.bytes, sasl.server.max.receive.size and the shared
// request pool (queued.max.request.bytes), admits a frame before its body
// is read or decoded, mutes a connection whose answers are not being read,
// and writes the answers in request order from pooled frames.
//
// It owns no API: a Handler (the broker) opens each connection (its TLS
// handshake and principal), decodes and answers its requests, and says
// who the client is through Conn. The package must not import the broker
// or know any API beyond the bytes of a frame; what a request means, who
// may send it and how it is answered are the Handler's.
package network
