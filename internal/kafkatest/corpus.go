package kafkatest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// WriteCorpusEntry writes one (key, version, body) input of the fuzz
// target named target under testdata/fuzz, in the "go test fuzz v1"
// format, named by its hash as the fuzzer names them.
func WriteCorpusEntry(tb testing.TB, target string, key, version int16, body []byte) {
	tb.Helper()
	entry := fmt.Sprintf("go test fuzz v1\nint16(%d)\nint16(%d)\n[]byte(%q)\n", key, version, body)
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("create corpus dir: %v", err)
	}
	name := fmt.Sprintf("%x", sha256.Sum256([]byte(entry)))[:16]
	if err := os.WriteFile(filepath.Join(dir, name), []byte(entry), 0o644); err != nil {
		tb.Fatalf("write corpus entry: %v", err)
	}
}
