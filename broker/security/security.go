// Package security owns who a Kafka client is and what it may do on a
// tripod broker: the listeners' TLS configuration and key material
// (ssl.*), the SASL mechanisms with their server-side exchanges and
// configuration (sasl.*, JAAS), SCRAM credentials, the mapping of client
// certificates to principals (ssl.principal.mapping.rules), and the
// authorizer: Kafka's ACL semantics over an index of the ACLs, and the
// rule each Kafka API asks it.
//
// It reads the SCRAM credentials and ACLs of the coordination backend's
// security store (coord.SecurityStore) and keeps the latest state the
// broker's watch hands it. It must not import the broker: it does not
// accept connections, frame requests or encode responses, and knows a
// connection only through the small types it declares (Session, Conn),
// and the broker's metadata only through Metadata. The broker's Kafka
// API handlers (SaslHandshake, SaslAuthenticate, the ACL and SCRAM APIs)
// stay in the broker's numbered files and call this package.
package security

// The listeners' security protocols, as listener.security.protocol.map
// names them.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// ListenerPrefix starts the properties that override an ssl.* or SASL
// property for one listener: listener.name.<lower-cased name>.<key>.
const ListenerPrefix = "listener.name."
