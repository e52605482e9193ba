package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tripodmq/tripod/broker/config"
)

// hostilePartitions is the partition count of the hostile CreateTopics
// and CreatePartitions requests: before the partition bounds a broker
// accepted it and went on creating directories for minutes.
const hostilePartitions = 1000000

// kafkaFailedAuthenticationDelay is Kafka's default of
// connection.failed.authentication.delay.ms.
const kafkaFailedAuthenticationDelay = 100 * time.Millisecond

// limitHeapGrowth is the most heap a refused creation may cost: a
// refusal decodes a request of a few dozen bytes and creates nothing.
const limitHeapGrowth = 64 << 20

// createTopicsRequest is a CreateTopics v4 of topic with partitions
// partitions and replication factor 1.
func createTopicsRequest(topic string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 4
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	return req
}

// createPartitionsRequest is a CreatePartitions v1 growing topic to count
// partitions.
func createPartitionsRequest(topic string, count int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	return req
}

// timedRoundTrip is roundTrip that fails t unless the answer comes within
// within.
func timedRoundTrip(t *testing.T, nc net.Conn, req kmsg.Request, corr int32, within time.Duration) kmsg.Response {
	t.Helper()
	resp, err := tryRoundTrip(t, nc, req, corr, within)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tryRoundTrip sends req on nc and decodes its answer, or returns an
// error unless the answer comes within within.
func tryRoundTrip(t *testing.T, nc net.Conn, req kmsg.Request, corr int32, within time.Duration) (kmsg.Response, error) {
	t.Helper()
	if _, err := nc.Write(encodeRequest(req, corr)); err != nil {
		return nil, fmt.Errorf("write %s request: %w", kmsg.NameForKey(req.Key()), err)
	}
	start := time.Now()
	nc.SetReadDeadline(start.Add(within))
	var size [4]byte
	if _, err := readFull(nc, size[:]); err != nil {
		return nil, fmt.Errorf("%s: got %v after %v, want an answer within %v", kmsg.NameForKey(req.Key()), err, time.Since(start).Round(time.Millisecond), within)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := readFull(nc, frame); err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	return decodeResponse(t, req, frame, corr), nil
}

// readFull reads len(buf) bytes from nc.
func readFull(nc net.Conn, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := nc.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// checkRefused fails t unless code and msg are POLICY_VIOLATION with a
// message naming property.
func checkRefused(t *testing.T, what string, code int16, msg *string, property string) {
	t.Helper()
	if code != kerr.PolicyViolation.Code {
		t.Errorf("%s: got error %v, want %v", what, kerr.ErrorForCode(code), kerr.PolicyViolation)
	}
	if msg == nil || !strings.Contains(*msg, property+"=") {
		got := "none"
		if msg != nil {
			got = *msg
		}
		t.Errorf("%s: got message %q, want one naming %s and its value", what, got, property)
	}
}

// checkNothingCreated fails t if topic has partitions beyond the first
// have: in b's metadata cache, in a Metadata answer that does not create
// topics, or as directories under b's log dir.
func checkNothingCreated(t *testing.T, b *Broker, nc net.Conn, topic string, have int) {
	t.Helper()
	if c, ok := b.cache.Topic(topic); ok && len(c.Partitions) != have || !ok && have > 0 {
		t.Errorf("metadata cache: got topic %s with %d partitions, want %d", topic, len(c.Partitions), have)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	resp := roundTrip(t, nc, md, 99).(*kmsg.MetadataResponse)
	for _, rt := range resp.Topics {
		if have == 0 && rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("metadata of %s: got %v with %d partitions, want %v", topic, kerr.ErrorForCode(rt.ErrorCode), len(rt.Partitions), kerr.UnknownTopicOrPartition)
		}
		if have > 0 && len(rt.Partitions) != have {
			t.Errorf("metadata of %s: got %d partitions, want %d", topic, len(rt.Partitions), have)
		}
	}
	entries, err := os.ReadDir(b.cfg.LogDirs[0])
	if err != nil {
		t.Fatalf("read log dir: %v", err)
	}
	dirs := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), topic+"-") {
			dirs++
		}
	}
	if dirs != have {
		t.Errorf("log dir: got %d partition directories of %s, want %d", dirs, topic, have)
	}
}

// TestHostileCreateTopicsMillionPartitions sends a CreateTopics of one
// topic with 1 000 000 partitions: it is refused at once with
// POLICY_VIOLATION naming max.request.partitions, creates nothing and
// costs the broker little heap; the broker serves on.
func TestHostileCreateTopicsMillionPartitions(t *testing.T) {
	b := startBroker(t, testConfig(t))
	nc := dialBroker(t, b)
	watch := watchHeap(t)
	answer, err := tryRoundTrip(t, nc, createTopicsRequest("million", hostilePartitions), 1, 10*time.Second)
	watch.checkHeapGrowth(t, "CreateTopics of 1 000 000 partitions", limitHeapGrowth)
	if err != nil {
		t.Fatal(err)
	}
	resp := answer.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("got %d topics answered, want 1", len(resp.Topics))
	}
	checkRefused(t, "CreateTopics of 1 000 000 partitions", resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage, "max.request.partitions")
	checkNothingCreated(t, b, nc, "million", 0)
	checkServes(t, b)
}

// TestHostileCreatePartitionsPastBounds grows a topic that fits within
// max.partitions (accepted), then asks CreatePartitions for more than
// the cluster may hold (refused naming max.partitions) and for 1 000 000
// partitions (refused naming max.request.partitions, with little heap);
// a topic that would pass max.broker.partitions is refused naming it.
// Nothing refused is created, and the broker serves on.
func TestHostileCreatePartitionsPastBounds(t *testing.T) {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"max.partitions": "30", "max.broker.partitions": "25"})
	b := startBroker(t, cfg)
	// The lone broker answers CreateTopics once it runs the controller;
	// before, it answers NOT_CONTROLLER.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !b.cache.WaitFor(ctx, b.closing, func() bool { return b.member.Controller() != nil }) {
		t.Fatalf("broker %d is not the controller within 30s", b.cfg.BrokerID)
	}
	nc := dialBroker(t, b)
	const topic = "bounded"

	created := timedRoundTrip(t, nc, createTopicsRequest(topic, 10), 1, 10*time.Second).(*kmsg.CreateTopicsResponse)
	if code := created.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics of 10 partitions within max.partitions=30: got %v, want success", kerr.ErrorForCode(code))
	}
	grown := timedRoundTrip(t, nc, createPartitionsRequest(topic, 20), 2, 10*time.Second).(*kmsg.CreatePartitionsResponse)
	if code := grown.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreatePartitions to 20 within max.partitions=30: got %v, want success", kerr.ErrorForCode(code))
	}
	checkNothingCreated(t, b, nc, topic, 20)

	// 20 more would make 40 partitions in the cluster (max.partitions 30).
	past := timedRoundTrip(t, nc, createPartitionsRequest(topic, 40), 3, 10*time.Second).(*kmsg.CreatePartitionsResponse)
	checkRefused(t, "CreatePartitions to 40", past.Topics[0].ErrorCode, past.Topics[0].ErrorMessage, "max.partitions")
	checkNothingCreated(t, b, nc, topic, 20)

	watch := watchHeap(t)
	answer, err := tryRoundTrip(t, nc, createPartitionsRequest(topic, hostilePartitions), 4, 10*time.Second)
	watch.checkHeapGrowth(t, "CreatePartitions to 1 000 000", limitHeapGrowth)
	if err != nil {
		t.Fatal(err)
	}
	huge := answer.(*kmsg.CreatePartitionsResponse)
	checkRefused(t, "CreatePartitions to 1 000 000", huge.Topics[0].ErrorCode, huge.Topics[0].ErrorMessage, "max.request.partitions")
	checkNothingCreated(t, b, nc, topic, 20)

	// 8 more fit max.partitions (28 of 30) but not this one broker's
	// max.broker.partitions (28 replicas of 25).
	other := timedRoundTrip(t, nc, createTopicsRequest("other", 8), 5, 10*time.Second).(*kmsg.CreateTopicsResponse)
	checkRefused(t, "CreateTopics of 8 more replicas on broker 1", other.Topics[0].ErrorCode, other.Topics[0].ErrorMessage, "max.broker.partitions")
	checkNothingCreated(t, b, nc, "other", 0)
	checkServes(t, b)
}

// sendWrongPassword sends a SaslHandshake v1 for PLAIN and a
// SaslAuthenticate with a wrong password on a fresh connection to b's
// SASL listener, and returns the connection and when the SaslAuthenticate
// went out, without reading its answer.
func sendWrongPassword(t *testing.T, b *Broker) (net.Conn, time.Time) {
	t.Helper()
	nc := dialListener(t, b, "SASL_PLAINTEXT")
	if hs := handshake(t, nc, "PLAIN", 1); hs.ErrorCode != 0 {
		t.Fatalf("SaslHandshake PLAIN: got %v, want success", kerr.ErrorForCode(hs.ErrorCode))
	}
	sent := time.Now()
	if _, err := nc.Write(encodeRequest(wrongPasswordRequest(), 2)); err != nil {
		t.Fatalf("write SaslAuthenticate: %v", err)
	}
	return nc, sent
}

// wrongPasswordRequest is a SaslAuthenticate v1 of PLAIN with alice's
// name and a wrong password.
func wrongPasswordRequest() *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = []byte("\x00alice\x00not-alices-password")
	return req
}

// checkAuthFailed reads the answer to wrongPasswordRequest from nc and
// fails t unless it is SASL_AUTHENTICATION_FAILED; it returns when the
// answer arrived.
func checkAuthFailed(t *testing.T, nc net.Conn) time.Time {
	t.Helper()
	resp := decodeResponse(t, wrongPasswordRequest(), readFrame(t, nc), 2).(*kmsg.SASLAuthenticateResponse)
	answered := time.Now()
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("SaslAuthenticate with a wrong password: got %v, want %v", kerr.ErrorForCode(resp.ErrorCode), kerr.SaslAuthenticationFailed)
	}
	return answered
}

// TestHostileFailedLoginIsDelayed: a wrong password's answer, and the
// close after it, come no sooner than
// connection.failed.authentication.delay.ms after the SaslAuthenticate,
// as in Kafka (KIP-306), while a correct login on another connection
// meanwhile succeeds at once; a client guessing passwords one after
// another is slowed to one guess per delay. The broker serves on.
func TestHostileFailedLoginIsDelayed(t *testing.T) {
	const delay = 1500 * time.Millisecond
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"connection.failed.authentication.delay.ms": "1500"})
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)

	nc, sent := sendWrongPassword(t, b)
	type outcome struct{ answered, closed time.Time }
	failed := make(chan outcome, 1)
	go func() {
		// The test's helpers call t.Fatalf only from the test's own
		// goroutine: this one only reads and reports.
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		var o outcome
		buf := make([]byte, 4096)
		for {
			n, err := nc.Read(buf)
			if n > 0 && o.answered.IsZero() {
				o.answered = time.Now()
			}
			if err != nil {
				o.closed = time.Now()
				failed <- o
				return
			}
		}
	}()
	start := time.Now()
	err := login(ctx, b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	loginTook := time.Since(start)
	if err != nil {
		t.Fatalf("correct login beside the failed one: %v", err)
	}
	o := <-failed
	t.Logf("correct login took %v; the wrong password was answered after %v, its connection closed after %v",
		loginTook.Round(time.Millisecond), o.answered.Sub(sent).Round(time.Millisecond), o.closed.Sub(sent).Round(time.Millisecond))
	if loginTook >= delay {
		t.Errorf("correct login beside the failed one: got %v, want less than the delay %v", loginTook.Round(time.Millisecond), delay)
	}
	if o.answered.IsZero() {
		t.Errorf("wrong password: got the connection closed without an answer, want SASL_AUTHENTICATION_FAILED")
	} else if got := o.answered.Sub(sent); got < delay {
		t.Errorf("wrong password: got the answer %v after the request, want at least %v", got.Round(time.Millisecond), delay)
	}
	if got := o.closed.Sub(sent); got < delay {
		t.Errorf("wrong password: got the connection closed %v after the request, want at least %v", got.Round(time.Millisecond), delay)
	}

	// A franz-go client guessing three passwords in a row.
	start = time.Now()
	for range 3 {
		if err := login(ctx, b, plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()); err == nil {
			t.Fatalf("login with a wrong password: got success, want a failure")
		}
	}
	took := time.Since(start)
	t.Logf("3 wrong passwords in a row refused in %v", took.Round(time.Millisecond))
	if took < 3*delay {
		t.Errorf("3 wrong passwords in a row: got them refused in %v, want at least %v", took.Round(time.Millisecond), 3*delay)
	}
	checkServes(t, b)
}

// TestFailedLoginWithoutDelay: connection.failed.authentication.delay.ms
// 0 answers a wrong password and closes at once: ten in a row take less
// than the default delay of each.
func TestFailedLoginWithoutDelay(t *testing.T) {
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"connection.failed.authentication.delay.ms": "0"})
	b := startBroker(t, cfg)
	start := time.Now()
	for range 10 {
		nc, _ := sendWrongPassword(t, b)
		checkAuthFailed(t, nc)
		expectClosed(t, nc)
	}
	got, most := time.Since(start), 10*kafkaFailedAuthenticationDelay
	t.Logf("10 wrong passwords answered and closed in %v", got.Round(time.Millisecond))
	if got >= most {
		t.Errorf("10 wrong passwords without delay: got them answered and closed in %v, want less than %v", got.Round(time.Millisecond), most)
	}
	checkServes(t, b)
}

// TestCloseDoesNotWaitForFailedLoginDelay: the broker's Close ends the
// delay of a failed login at once.
func TestCloseDoesNotWaitForFailedLoginDelay(t *testing.T) {
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"connection.failed.authentication.delay.ms": "60000", "controlled.shutdown.enable": "false"})
	b := startBroker(t, cfg)
	nc, _ := sendWrongPassword(t, b)
	if !waitUntil(10*time.Second, func() bool {
		for _, g := range goroutineStacks() {
			if strings.Contains(g, "answerFailedAuthentication") {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the failed login's connection is not in its delay")
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close broker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("close broker: got no return after 30s, want it not to wait for the 60 s delay")
	}
	t.Logf("broker closed in %v with a failed login's connection in its delay", time.Since(start).Round(time.Millisecond))
	expectClosed(t, nc)
}

// hostileLimitSeeds are the fuzz seeds of the partition bounds' attacks:
// CreateTopics and CreatePartitions of 1 000 000 partitions.
func hostileLimitSeeds(tb testing.TB) []requestSeed {
	tb.Helper()
	var seeds []requestSeed
	for _, req := range []kmsg.Request{createTopicsRequest("fuzz-million", hostilePartitions), createPartitionsRequest("fuzz-million", hostilePartitions)} {
		seeds = append(seeds, requestSeed{key: req.Key(), version: req.GetVersion(), body: req.AppendTo(nil)})
	}
	return seeds
}

// TestLimitPropertiesValidated: each bound's property refuses a value
// out of its range with a message naming the key and the range, and
// DefaultConfig's values are the ones documented.
func TestLimitPropertiesValidated(t *testing.T) {
	def := config.DefaultConfig()
	if def.MaxRequestPartitions != 100000 || def.MaxPartitions != 100000 || def.MaxBrokerPartitions != 100000 ||
		def.SASL.FailedAuthenticationDelay != kafkaFailedAuthenticationDelay {
		t.Errorf("defaults: got max.request.partitions %d, max.partitions %d, max.broker.partitions %d, connection.failed.authentication.delay.ms %v; want 100000, 100000, 100000, %v",
			def.MaxRequestPartitions, def.MaxPartitions, def.MaxBrokerPartitions, def.SASL.FailedAuthenticationDelay, kafkaFailedAuthenticationDelay)
	}
	for _, tc := range []struct{ key, value, want string }{
		{"max.request.partitions", "0", "max.request.partitions 0: must be between 1 and 2147483647"},
		{"max.partitions", "-1", "max.partitions -1: must be between 0 (no bound) and 2147483647"},
		{"max.broker.partitions", "-1", "max.broker.partitions -1: must be between 0 (no bound) and 2147483647"},
		{"connection.failed.authentication.delay.ms", "-1", "connection.failed.authentication.delay.ms -1: must be between 0 (no delay) and 2147483647"},
	} {
		cfg := testConfig(t)
		set(t, &cfg, map[string]string{tc.key: tc.value})
		err := cfg.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s=%s: got %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
	for _, key := range []string{"max.request.partitions", "max.partitions", "max.broker.partitions", "connection.failed.authentication.delay.ms"} {
		cfg := testConfig(t)
		if err := cfg.Set(key, "not-a-number"); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=not-a-number: got %v, want an error naming %s", key, err, key)
		}
	}
	// 0 turns the cluster bounds and the delay off.
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"max.partitions": "0", "max.broker.partitions": "0", "connection.failed.authentication.delay.ms": "0"})
	if err := cfg.Validate(); err != nil {
		t.Errorf("bounds off (0): got %v, want a valid config", err)
	}
}

// joinGroupRequest is a JoinGroup v3 of a new member of group with one
// "range" protocol carrying metadata.
func joinGroupRequest(group string, metadata []byte) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3
	req.Group, req.ProtocolType = group, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", metadata
	req.Protocols = append(req.Protocols, p)
	return req
}

// TestJoinGroupBounds: a group holds at most group.max.size members (a
// new member past it is answered GROUP_MAX_SIZE_REACHED at once), and a
// JoinGroup's protocol metadata is bounded by socket.request.max.bytes (a
// larger request closes the connection without the broker holding it).
// The broker serves on.
func TestJoinGroupBounds(t *testing.T) {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"group.max.size": "1", "group.initial.rebalance.delay.ms": "0", "socket.request.max.bytes": "1048576"})
	b := startBroker(t, cfg)
	const group = "bounded-group"

	first := dialBroker(t, b)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	var joined *kmsg.JoinGroupResponse
	corr := int32(0)
	if !waitUntil(30*time.Second, func() bool {
		// FindCoordinator creates __consumer_offsets; asked before the
		// broker's controller is elected it cannot yet, so a client asks
		// again, as this one does, while JoinGroup finds no coordinator.
		corr++
		roundTrip(t, first, fc, corr)
		corr++
		joined = timedRoundTrip(t, first, joinGroupRequest(group, []byte("first")), corr, 20*time.Second).(*kmsg.JoinGroupResponse)
		switch joined.ErrorCode {
		case kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code:
			return false
		}
		return true
	}) {
		t.Fatalf("first member's JoinGroup: got %v for 30s, want the coordinator to answer", kerr.ErrorForCode(joined.ErrorCode))
	}
	if joined.ErrorCode != 0 {
		t.Fatalf("first member's JoinGroup: got %v, want success", kerr.ErrorForCode(joined.ErrorCode))
	}

	second := dialBroker(t, b)
	full := timedRoundTrip(t, second, joinGroupRequest(group, []byte("second")), 1, 5*time.Second).(*kmsg.JoinGroupResponse)
	if full.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Errorf("second member's JoinGroup with group.max.size 1: got %v, want %v", kerr.ErrorForCode(full.ErrorCode), kerr.GroupMaxSizeReached)
	}

	huge := dialBroker(t, b)
	watch := watchHeap(t)
	// The broker closes the connection once it has read the size, so
	// the write may fail part way.
	_, _ = huge.Write(encodeRequest(joinGroupRequest(group, make([]byte, 4<<20)), 1))
	expectClosed(t, huge)
	watch.checkHeapGrowth(t, "JoinGroup with 4 MiB of protocol metadata", limitHeapGrowth)
	checkServes(t, b)
}
