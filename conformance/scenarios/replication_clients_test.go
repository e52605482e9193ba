package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
)

// load is S4's traffic on one partition: a producer writing sequentially
// numbered records with acks=all, one at a time, and a consumer reading
// the partition from its start, both until stop.
type load struct {
	producer, consumer *kgo.Client
	cancel             context.CancelFunc
	wg                 sync.WaitGroup

	mu      sync.Mutex
	acked   []record // each acknowledged record at the offset its ack named
	read    []record // each record the consumer read
	lastErr error
}

// startLoad starts the producer and the consumer on topic/partition.
func startLoad(t *testing.T, c *cluster.Cluster, topic string, partition int32) *load {
	t.Helper()
	producer, err := newKafkaClient(c, acksAll...)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	consumer, err := newKafkaClient(c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		producer.Close()
		t.Fatalf("consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{producer: producer, consumer: consumer, cancel: cancel}
	l.wg.Add(2)
	go l.produce(ctx, topic, partition)
	go l.consume(ctx)
	t.Cleanup(func() { l.stop(t) })
	return l
}

func (l *load) produce(ctx context.Context, topic string, partition int32) {
	defer l.wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		value := topic + "-" + strconv.Itoa(i)
		rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
		err := l.producer.ProduceSync(ctx, rec).FirstErr()
		l.mu.Lock()
		if err != nil {
			l.lastErr = err
		} else {
			l.acked = append(l.acked, record{rec.Offset, value})
		}
		l.mu.Unlock()
	}
}

func (l *load) consume(ctx context.Context) {
	defer l.wg.Done()
	for ctx.Err() == nil {
		fetches := l.consumer.PollFetches(ctx)
		l.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			l.read = append(l.read, record{r.Offset, string(r.Value)})
		})
		l.mu.Unlock()
	}
}

// startLoads starts a load on each of the first n partitions of topic
// and waits until each has 10 records acknowledged.
func startLoads(t *testing.T, c *cluster.Cluster, topic string, n int) []*load {
	t.Helper()
	loads := make([]*load, n)
	for p := range loads {
		loads[p] = startLoad(t, c, topic, int32(p))
	}
	for _, l := range loads {
		l.waitAcked(t, 10)
	}
	return loads
}

// checkReadBack stops each load of topic (loads[p] on partition p) and
// checks that every record it had acknowledged is in the partition's log
// at its offset; it returns how many were acknowledged in all.
func checkReadBack(t *testing.T, c *cluster.Cluster, topic string, loads []*load) int {
	t.Helper()
	total := 0
	for p, l := range loads {
		acked, _ := l.stop(t)
		total += len(acked)
		final := readPartition(t, c, topic, int32(p))
		for _, r := range acked {
			if !holds(final, r.offset, r.value) {
				t.Errorf("%s/%d: acknowledged record %v is not in the log", topic, p, r)
			}
		}
	}
	return total
}

// ackedCount returns how many records were acknowledged so far.
func (l *load) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitAcked waits until n records were acknowledged.
func (l *load) waitAcked(t *testing.T, n int) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.acked) < n {
			return fmt.Errorf("%d records acknowledged, want %d (last error %v)", len(l.acked), n, l.lastErr)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
}

// stop ends the producer and the consumer and returns what was
// acknowledged and what was read. Stopping twice returns the same.
func (l *load) stop(t *testing.T) (acked, read []record) {
	l.cancel()
	l.wg.Wait()
	l.producer.Close()
	l.consumer.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]record(nil), l.acked...), append([]record(nil), l.read...)
}

// holdDialer dials a kgo client's connections so that the test can hold
// back what one broker sends it: while held, data read from a connection
// to that broker waits instead of reaching the client; on release it is
// thrown away and the connection fails, as if the broker had died before
// its answer left. A produce request sent while held reaches the broker
// and is handled; only its answer is lost. Connections to other brokers
// are never held, so a retry to a new leader is answered. Its methods
// are safe for concurrent use.
type holdDialer struct {
	mu      sync.Mutex
	addr    string        // the held broker's host:port
	release chan struct{} // closed by Release; nil when not holding
}

// errHeldBack is what a connection returns for data that was held back
// and then released.
var errHeldBack = errors.New("the broker's answer was held back and dropped by the test")

// Dial is the kgo.Dialer function.
func (d *holdDialer) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: conn, dialer: d, addr: host}, nil
}

// Hold starts holding back what connections to the broker at addr read.
func (d *holdDialer) Hold(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addr = addr
	if d.release == nil {
		d.release = make(chan struct{})
	}
}

// Release ends the hold: every held read fails and its connection closes.
func (d *holdDialer) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.release != nil {
		close(d.release)
		d.release = nil
	}
}

// gate returns the channel a read from a connection to addr waits on,
// nil when such reads are not held.
func (d *holdDialer) gate(addr string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if addr != d.addr {
		return nil
	}
	return d.release
}

// heldConn is a connection of a holdDialer.
type heldConn struct {
	net.Conn
	dialer *holdDialer
	addr   string // the host:port dialed
}

// Read reads from the connection; data that arrives while the dialer
// holds waits for Release and is then dropped, failing the connection.
func (c *heldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if release := c.dialer.gate(c.addr); release != nil {
			<-release
			c.Conn.Close()
			return 0, errHeldBack
		}
	}
	return n, err
}

// produceAsync produces value to topic/partition through cl without
// waiting, and returns a channel that gets the record's ack: its offset
// and error, and when it arrived.
func produceAsync(cl *kgo.Client, topic string, partition int32, value string) <-chan asyncAck {
	done := make(chan asyncAck, 1)
	rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
	cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		done <- asyncAck{offset: r.Offset, err: err, at: time.Now()}
	})
	return done
}

// asyncAck is the outcome of produceAsync.
type asyncAck struct {
	offset int64
	err    error
	at     time.Time
}

// waitAck waits up to settle for an asynchronous produce's outcome.
func waitAck(t *testing.T, what string, done <-chan asyncAck) asyncAck {
	t.Helper()
	select {
	case a := <-done:
		return a
	case <-time.After(settle):
		t.Fatalf("%s: no answer within %v", what, settle)
		return asyncAck{}
	}
}
