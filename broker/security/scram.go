package security

import (
	"crypto/hmac"

	"github.com/xdg-go/scram"

	"github.com/tripodmq/tripod/coord"
)

// SCRAM's iteration bounds, Kafka's: a credential is accepted with 4096
// to 16384 iterations.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// scramHashes are the SCRAM mechanisms' hash functions.
var scramHashes = map[string]scram.HashGeneratorFcn{coord.ScramSHA256: scram.SHA256, coord.ScramSHA512: scram.SHA512}

// ScramCredential derives the stored credential of a salted password
// (RFC 5802): StoredKey = H(HMAC(SaltedPassword, "Client Key")),
// ServerKey = HMAC(SaltedPassword, "Server Key"). mechanism is
// coord.ScramSHA256 or coord.ScramSHA512.
func ScramCredential(mechanism string, salt, saltedPassword []byte, iterations int) coord.ScramCredential {
	h := scramHashes[mechanism]
	storedKey := h()
	storedKey.Write(hmacOf(h, saltedPassword, "Client Key"))
	return coord.ScramCredential{
		Mechanism: mechanism, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: storedKey.Sum(nil), ServerKey: hmacOf(h, saltedPassword, "Server Key"),
	}
}

// hmacOf is HMAC(key, msg) with h.
func hmacOf(h scram.HashGeneratorFcn, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
