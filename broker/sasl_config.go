package broker

// SASLConfig holds the broker's SASL properties, under Kafka's names.
type SASLConfig struct{}

// validate checks the SASL properties.
func (c SASLConfig) validate() error { return nil }
