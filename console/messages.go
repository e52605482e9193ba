package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The bounds of a request to the message browser.
const (
	// defaultPageRecords and maxPageRecords bound the records one page
	// shows (parameter limit).
	defaultPageRecords, maxPageRecords = 50, 500
	// defaultScanRecords and maxScanRecords bound the records a filtered
	// browse reads looking for matches (parameter scan).
	defaultScanRecords, maxScanRecords = 10_000, 1_000_000
	// scanTimeLimit bounds the time one browse request reads.
	scanTimeLimit = 5 * time.Second
	// fetchPartitionBytes is how much one Fetch asks of the partition; a
	// larger first batch still comes whole, as Kafka sends it (KIP-74).
	fetchPartitionBytes = 1 << 20
	// backwardChunk is how many offsets a newest-first browse reads at a
	// time, oldest first, before it walks them backwards.
	backwardChunk = 500
)

// messageTopic is a topic the message browser offers.
type messageTopic struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

// handleMessageTopics answers the topics and their partition counts, for
// the message browser's topic field.
func (d *dataAPI) handleMessageTopics(w http.ResponseWriter, r *http.Request) {
	topics, err := d.adm.ListTopics(r.Context())
	if err != nil && len(topics) == 0 {
		writeError(w, http.StatusBadGateway, fmt.Errorf("list topics: %w", err))
		return
	}
	out := []messageTopic{}
	for _, t := range topics.Sorted() {
		if t.Err == nil {
			out = append(out, messageTopic{t.Topic, len(t.Partitions)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// payload is a key, value or header value as the page gets it: its bytes
// in base64 and whether they are UTF-8 text, so the page can show them
// as text, JSON or hex.
type payload struct {
	Base64 string `json:"base64"`
	UTF8   bool   `json:"utf8"`
	Size   int    `json:"size"`
}

// newPayload returns b as a payload; nil (a null key or value) stays nil.
func newPayload(b []byte) *payload {
	if b == nil {
		return nil
	}
	return &payload{Base64: base64.StdEncoding.EncodeToString(b), UTF8: utf8.Valid(b), Size: len(b)}
}

// messageHeader is one header of a record.
type messageHeader struct {
	Key   string   `json:"key"`
	Value *payload `json:"value"`
}

// message is one record of a partition.
type message struct {
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"` // Unix milliseconds
	Partition int32           `json:"partition"`
	Key       *payload        `json:"key"`
	Value     *payload        `json:"value"`
	Headers   []messageHeader `json:"headers"`
}

// newMessage returns r as the page shows it.
func newMessage(r *kgo.Record) message {
	m := message{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Partition: r.Partition,
		Key: newPayload(r.Key), Value: newPayload(r.Value), Headers: []messageHeader{}}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, messageHeader{h.Key, newPayload(h.Value)})
	}
	return m
}

// matches reports whether needle is in r's key, value or a header's
// value; every record matches an empty needle.
func matches(r *kgo.Record, needle []byte) bool {
	if len(needle) == 0 || bytes.Contains(r.Key, needle) || bytes.Contains(r.Value, needle) {
		return true
	}
	return slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return bytes.Contains(h.Value, needle) })
}

// browseRequest is what a page of the message browser asks for.
type browseRequest struct {
	topic     string
	partition int32
	// newestFirst walks from the start offset down to the log start;
	// else from it up to the high watermark.
	newestFirst bool
	// start is the first offset looked at, -1 for the newest (newest
	// first) or the oldest (oldest first).
	start int64
	// at, when set, starts at the first record at or after it instead.
	at    *time.Time
	limit int
	scan  int64
	// needle filters the records by substring; nil takes every record.
	needle []byte
}

// parseBrowse reads a browse request from r's query: topic, partition,
// order (newest|oldest), offset or time, limit, scan and q.
func parseBrowse(r *http.Request) (browseRequest, error) {
	q := r.URL.Query()
	b := browseRequest{topic: q.Get("topic"), start: -1}
	if b.topic == "" {
		return b, badRequest("parameter topic: give the topic to browse")
	}
	p, err := intParam(r, "partition", -1, 0, 1<<31-1)
	if err != nil {
		return b, err
	}
	if p < 0 {
		return b, badRequest("parameter partition: give the partition to browse, from 0")
	}
	b.partition = int32(p)
	switch order := q.Get("order"); order {
	case "", "newest":
		b.newestFirst = true
	case "oldest":
	default:
		return b, badRequest("parameter order=%q: want newest or oldest", order)
	}
	if b.start, err = intParam(r, "offset", -1, 0, 1<<63-1); err != nil {
		return b, err
	}
	at, ok, err := timeParam(r, "time")
	if err != nil {
		return b, err
	}
	if ok {
		if b.start >= 0 {
			return b, badRequest("parameters offset and time: give one, not both")
		}
		b.at = &at
	}
	limit, err := intParam(r, "limit", defaultPageRecords, 1, maxPageRecords)
	if err != nil {
		return b, err
	}
	b.limit = int(limit)
	if b.scan, err = intParam(r, "scan", defaultScanRecords, 1, maxScanRecords); err != nil {
		return b, err
	}
	if needle := q.Get("q"); needle != "" {
		b.needle = []byte(needle)
	}
	return b, nil
}

// browseAnswer is a page of records and how far the browse got.
type browseAnswer struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// LogStartOffset and HighWatermark bound what may be read.
	LogStartOffset int64     `json:"logStartOffset"`
	HighWatermark  int64     `json:"highWatermark"`
	Order          string    `json:"order"`
	Records        []message `json:"records"`
	// Scanned is the number of records read, at offsets ScannedFrom to
	// ScannedTo in reading order (-1 when none was read).
	Scanned     int64 `json:"scanned"`
	ScannedFrom int64 `json:"scannedFrom"`
	ScannedTo   int64 `json:"scannedTo"`
	// Next is the offset to continue from in the same order, nil when
	// the browse reached the end of the log in that direction.
	Next *int64 `json:"next"`
	// StoppedBy says why the browse stopped: "limit" (a full page),
	// "end" (the log's end), "scan" (the scan bound), "time" (the time
	// bound).
	StoppedBy string `json:"stoppedBy"`
}

// handleMessages answers a page of one partition's records, read by
// offset or from a time, newest or oldest first, filtered by a
// substring within bounds on records scanned and time spent.
func (d *dataAPI) handleMessages(w http.ResponseWriter, r *http.Request) {
	req, err := parseBrowse(r)
	if err != nil {
		writeFailure(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), scanTimeLimit+10*time.Second)
	defer cancel()
	part, err := d.partition(ctx, req.topic, req.partition)
	if err != nil {
		writeFailure(w, http.StatusBadGateway, err)
		return
	}
	answer, err := d.browse(ctx, part, req)
	if err != nil {
		writeFailure(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// partitionRef is a partition, its topic's ID and its leader.
type partitionRef struct {
	topic     string
	topicID   [16]byte
	partition int32
	leader    int32
}

// partition looks up topic's partition in the cluster's metadata; a
// topic or partition the cluster does not have is the request's fault.
func (d *dataAPI) partition(ctx context.Context, topic string, partition int32) (partitionRef, error) {
	topics, err := d.adm.ListTopics(ctx, topic)
	if err != nil {
		return partitionRef{}, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	t, ok := topics[topic]
	switch {
	case !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition):
		return partitionRef{}, badRequest("topic %s: the cluster has no such topic", topic)
	case t.Err != nil:
		return partitionRef{}, fmt.Errorf("describe topic %s: %w", topic, t.Err)
	}
	p, ok := t.Partitions[partition]
	if !ok {
		return partitionRef{}, badRequest("parameter partition=%d: topic %s has partitions 0 to %d", partition, topic, len(t.Partitions)-1)
	}
	if p.Leader < 0 {
		return partitionRef{}, fmt.Errorf("%s[%d] has no leader now", topic, partition)
	}
	return partitionRef{topic: topic, topicID: t.ID, partition: partition, leader: p.Leader}, nil
}

// browse reads req's page of part.
func (d *dataAPI) browse(ctx context.Context, part partitionRef, req browseRequest) (browseAnswer, error) {
	a := browseAnswer{Topic: part.topic, Partition: part.partition, Order: "oldest", Records: []message{},
		ScannedFrom: -1, ScannedTo: -1}
	if req.newestFirst {
		a.Order = "newest"
	}
	bounds, err := d.bounds(ctx, part, req.at)
	if err != nil {
		return a, err
	}
	a.LogStartOffset, a.HighWatermark = bounds.start, bounds.end
	start := req.start
	switch {
	case req.at != nil:
		start = bounds.atTime
		if req.newestFirst {
			// Newest first from a time: the records before it, the
			// newest of them first.
			start--
		}
	case start < 0 && req.newestFirst:
		start = bounds.end - 1
	case start < 0:
		start = bounds.start
	}
	deadline := time.Now().Add(scanTimeLimit)
	step := int64(1)
	if req.newestFirst {
		step = -1
	}
	// take looks at one record read in order; it returns false when the
	// browse must stop, and then a.Next is where to continue.
	take := func(rec *kgo.Record) bool {
		stop := func(why string, next int64) bool {
			a.StoppedBy, a.Next = why, &next
			return false
		}
		switch {
		case a.Scanned >= req.scan:
			return stop("scan", rec.Offset)
		case time.Now().After(deadline):
			return stop("time", rec.Offset)
		}
		a.Scanned++
		if a.ScannedFrom < 0 {
			a.ScannedFrom = rec.Offset
		}
		a.ScannedTo = rec.Offset
		if matches(rec, req.needle) {
			a.Records = append(a.Records, newMessage(rec))
			if len(a.Records) >= req.limit {
				return stop("limit", rec.Offset+step)
			}
		}
		return true
	}
	if req.newestFirst {
		// Without a filter, a page's records are all it needs to read.
		chunk := int64(backwardChunk)
		if req.needle == nil {
			chunk = min(chunk, int64(req.limit))
		}
		err = d.readBackward(ctx, &part, min(start, bounds.end-1), bounds.start, chunk, take)
	} else {
		err = d.readForward(ctx, &part, max(start, bounds.start), bounds.end, take)
	}
	if err != nil {
		return a, err
	}
	if a.StoppedBy == "" {
		a.StoppedBy = "end"
	}
	return a, nil
}

// partitionBounds are a partition's log start offset and high
// watermark, and the offset of the first record at or after a time.
type partitionBounds struct {
	start, end, atTime int64
}

// bounds lists part's log start and end offsets (the high watermark,
// which bounds what a consumer may read), and with at the first offset
// at or after it (the end offset when no record is that new).
func (d *dataAPI) bounds(ctx context.Context, part partitionRef, at *time.Time) (partitionBounds, error) {
	var b partitionBounds
	lookup := func(what string, l kadm.ListedOffsets, err error) (int64, error) {
		if err != nil {
			return 0, fmt.Errorf("list %s offset of %s[%d]: %w", what, part.topic, part.partition, err)
		}
		o, ok := l.Lookup(part.topic, part.partition)
		switch {
		case !ok:
			return 0, fmt.Errorf("list %s offset of %s[%d]: not in the response", what, part.topic, part.partition)
		case o.Err != nil:
			return 0, fmt.Errorf("list %s offset of %s[%d]: %w", what, part.topic, part.partition, o.Err)
		}
		return o.Offset, nil
	}
	var err error
	l, lerr := d.adm.ListStartOffsets(ctx, part.topic)
	if b.start, err = lookup("start", l, lerr); err != nil {
		return b, err
	}
	l, lerr = d.adm.ListEndOffsets(ctx, part.topic)
	if b.end, err = lookup("end", l, lerr); err != nil {
		return b, err
	}
	if at != nil {
		l, lerr = d.adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), part.topic)
		if b.atTime, err = lookup("timestamp", l, lerr); err != nil {
			return b, err
		}
		if b.atTime < 0 || b.atTime > b.end {
			b.atTime = b.end
		}
	}
	return b, nil
}

// readForward reads part from offset from up to end (exclusive), giving
// each record to take until it returns false.
func (d *dataAPI) readForward(ctx context.Context, part *partitionRef, from, end int64, take func(*kgo.Record) bool) error {
	for from < end {
		records, next, err := d.fetch(ctx, part, from)
		if err != nil {
			return err
		}
		at := from
		for _, rec := range records {
			if rec.Offset < from || rec.Offset >= end {
				continue
			}
			if !take(rec) {
				return nil
			}
			from = rec.Offset + 1
		}
		// next passes control records and gaps; a fetch that got nothing
		// at all moves on by one all the same.
		from = max(from, next)
		if from == at {
			from++
		}
	}
	return nil
}

// readBackward reads part from offset from down to start, newest first,
// giving each record to take until it returns false. It reads chunks of
// chunk offsets oldest first and walks each backwards.
func (d *dataAPI) readBackward(ctx context.Context, part *partitionRef, from, start, chunk int64, take func(*kgo.Record) bool) error {
	for from >= start {
		lo := max(start, from-chunk+1)
		var chunk []*kgo.Record
		for at := lo; at <= from; {
			records, next, err := d.fetch(ctx, part, at)
			if err != nil {
				return err
			}
			for _, rec := range records {
				if rec.Offset >= at && rec.Offset <= from {
					chunk = append(chunk, rec)
				}
			}
			at = max(at+1, next)
		}
		for _, rec := range slices.Backward(chunk) {
			if !take(rec) {
				return nil
			}
		}
		from = lo - 1
	}
	return nil
}

// fetch reads what part's leader answers one Fetch from offset, as a
// consumer that reads uncommitted records and belongs to no group, and
// returns the records and the offset after the batches it got. When the
// leader has moved or cannot be reached, it looks the leader up again
// and asks once more.
func (d *dataAPI) fetch(ctx context.Context, part *partitionRef, offset int64) ([]*kgo.Record, int64, error) {
	records, next, err := d.fetchOnce(ctx, *part, offset)
	if err == nil || ctx.Err() != nil || errors.Is(err, kerr.OffsetOutOfRange) {
		return records, next, err
	}
	moved, lookupErr := d.partition(ctx, part.topic, part.partition)
	if lookupErr != nil || moved.leader == part.leader && !errors.Is(err, kerr.NotLeaderForPartition) {
		return nil, offset, err
	}
	*part = moved
	return d.fetchOnce(ctx, *part, offset)
}

// fetchOnce sends one Fetch from offset to part's leader.
func (d *dataAPI) fetchOnce(ctx context.Context, part partitionRef, offset int64) ([]*kgo.Record, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = fetchPartitionBytes
	req.IsolationLevel = 0 // read_uncommitted
	req.SessionEpoch = -1  // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = part.topic, part.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = part.partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = fetchPartitionBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	failed := func(err error) error {
		return fmt.Errorf("fetch %s[%d] at offset %d from broker %d: %w", part.topic, part.partition, offset, part.leader, err)
	}
	resp, err := req.RequestWith(ctx, d.cl.Broker(int(part.leader)))
	if err != nil {
		return nil, offset, failed(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, offset, failed(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, offset, failed(errors.New("the answer is not of that partition"))
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: offset, IsolationLevel: kgo.ReadUncommitted(), Topic: part.topic, Partition: part.partition,
	}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return nil, offset, failed(fp.Err)
	}
	return fp.Records, next, nil
}

// produceRequest is the body of POST /api/messages: one test record.
type produceRequest struct {
	Topic string `json:"topic"`
	// Partition is the partition to write to; nil or -1 lets the
	// client's partitioner choose (by the key's hash when it has one).
	Partition *int32 `json:"partition"`
	// Key and Value are text; a nil Key writes a record without a key.
	Key     *string `json:"key"`
	Value   string  `json:"value"`
	Headers []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

// produced is the answer to a produce: where the record was written.
type produced struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
}

// maxProduceBody bounds the body of a produce request.
const maxProduceBody = 1 << 20

// handleProduce writes one test record with acks=all and answers its
// partition and offset. The page asks the user to confirm it first.
func (d *dataAPI) handleProduce(w http.ResponseWriter, r *http.Request) {
	var req produceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxProduceBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: want JSON {topic, partition, key, value, headers} of at most %d bytes: %v", maxProduceBody, err))
		return
	}
	if req.Topic == "" {
		writeError(w, http.StatusBadRequest, errors.New("topic: give the topic to write to"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	partitioner := kgo.StickyKeyPartitioner(nil)
	if req.Partition != nil && *req.Partition >= 0 {
		if _, err := d.partition(ctx, req.Topic, *req.Partition); err != nil {
			writeFailure(w, http.StatusBadGateway, err)
			return
		}
		partitioner = kgo.ManualPartitioner()
	} else if _, err := d.partition(ctx, req.Topic, 0); err != nil {
		writeFailure(w, http.StatusBadGateway, err)
		return
	}
	rec := &kgo.Record{Topic: req.Topic, Value: []byte(req.Value)}
	if req.Partition != nil {
		rec.Partition = *req.Partition
	}
	if req.Key != nil {
		rec.Key = []byte(*req.Key)
	}
	for _, h := range req.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	// A producer of its own: the console's client is not one, and the
	// partitioner depends on the request.
	cl, err := kgo.NewClient(append(slices.Clone(d.opts.Client), kgo.RecordPartitioner(partitioner),
		kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	defer cl.Close()
	res := cl.ProduceSync(ctx, rec)
	if err := res.FirstErr(); err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("produce to %s: %w", req.Topic, err))
		return
	}
	writeJSON(w, http.StatusOK, produced{rec.Topic, rec.Partition, rec.Offset, rec.Timestamp.UnixMilli()})
}
