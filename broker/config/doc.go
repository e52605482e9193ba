// Package config owns the broker's properties: their Kafka names, the
// Config they fill, their defaults (DefaultConfig, which takes each
// default a package owns from that package), their ranges (Set and
// Validate, whose errors name the key), their documentation
// (PropertyDocs, from which `tripod serve --help-config`,
// DescribeConfigs' documentation and docs/configuration.md's tables are
// made), the topic configs and their checks, the listener properties
// (ListenerSpecs), which properties change on a running broker, and the
// parsing of a Java properties file (ParseProperties). It derives the
// configurations of the parts a broker composes: coord's, the
// controller's, group's, replication's and replication/log's.
//
// Package config must not run anything: it starts no goroutine, opens no
// connection and does no I/O beyond reading the properties file it is
// handed and, when the broker starts and asks for them (OpenCoordTLS),
// the coordination backend's key files. It must not import package
// broker: the broker, its API handlers and its dynamic configs read the
// table through this package's exported names.
package config
