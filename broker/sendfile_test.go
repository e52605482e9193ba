package broker

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchSendsRecordsFromTheSegmentFiles: a consumer on a plaintext
// listener gets its records sent from the segment files (sendfile:
// tripod_bytes_out_spliced_total grows by about what it read), one on
// the SSL listener of the same broker gets them copied (the counter does
// not move), and both read every record, in order, byte for byte.
func TestFetchSendsRecordsFromTheSegmentFiles(t *testing.T) {
	ca := newTestCA(t, "ca")
	b := startBroker(t, sslConfig(t, ca))
	const topic, n, size = "zero-copy", 400, 10 << 10
	createTopic(t, b, topic, 1, nil)
	value := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%08d", i)), size/8) }
	ctx := testContext(t, time.Minute)
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20))
	var records []*kgo.Record
	for i := range n {
		records = append(records, &kgo.Record{Value: value(i)})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume := func(name string, cl *kgo.Client) {
		t.Helper()
		for i := 0; i < n; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s: poll: %v", name, err)
			}
			for _, r := range fs.Records() {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, value(i)) {
					t.Fatalf("%s: record at offset %d (%d bytes), want offset %d with its value", name, r.Offset, len(r.Value), i)
				}
				i++
			}
		}
	}
	before := counterValue(b.metrics.bytesSpliced)
	consume("plaintext", newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	spliced := counterValue(b.metrics.bytesSpliced) - before
	if spliced < n*size/2 {
		t.Fatalf("plaintext consumer: %.0f bytes sent from the segment files, want most of the %d it read", spliced, n*size)
	}
	before = counterValue(b.metrics.bytesSpliced)
	consume("SSL", tlsClient(t, b, ca, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	if got := counterValue(b.metrics.bytesSpliced) - before; got != 0 {
		t.Fatalf("SSL consumer: %.0f bytes sent from the segment files, want none (TLS encrypts in memory)", got)
	}
}
