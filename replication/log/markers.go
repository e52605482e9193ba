package log

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Transaction markers (KIP-98): the control batch that WriteTxnMarkers
// writes on every partition of a transaction to end it. Its one control
// record has Kafka's control record key (version int16 0, type int16:
// ABORT 0, COMMIT 1) and EndTransactionMarker value (version int16 0,
// coordinator epoch int32), in a batch of the transaction's producer id
// and epoch with the transactional and control attributes.
const (
	controlKeyVersion  = 0
	controlTypeAbort   = 0
	controlTypeCommit  = 1
	markerValueVersion = 0
	controlKeySize     = 2 + 2
	markerValueSize    = 2 + 4
)

// BuildMarker returns the control batch that ends producerID's
// transaction at producerEpoch, commit or abort, written for the
// transaction coordinator of coordinatorEpoch, timestamped now (ms). Its
// base offset and partition leader epoch are 0: Append sets them.
func BuildMarker(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, now time.Time) []byte {
	key := make([]byte, controlKeySize)
	binary.BigEndian.PutUint16(key, controlKeyVersion)
	binary.BigEndian.PutUint16(key[2:], controlTypeAbort)
	if commit {
		binary.BigEndian.PutUint16(key[2:], controlTypeCommit)
	}
	value := make([]byte, markerValueSize)
	binary.BigEndian.PutUint16(value, markerValueVersion)
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	return buildBatchAs([]KV{{Key: key, Value: value}}, now, attrTransactional|attrControl, producerID, producerEpoch)
}

// Marker is a transaction marker as a control batch holds it.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// ReadMarker reads the transaction marker of batch, one v2 control batch
// (checked as Append checks a batch, CRC-32C included). A control record
// of a newer key or value version is read by the fields this version
// knows, as Kafka reads it; one of a type other than ABORT and COMMIT is
// an error. Errors wrap ErrCorruptMessage or ErrUnsupportedMagic.
func ReadMarker(batch []byte) (Marker, error) {
	headers, err := splitBatches(batch)
	if err != nil {
		return Marker{}, err
	}
	if len(headers) != 1 {
		return Marker{}, corrupt("a transaction marker in %d batches, want 1", len(headers))
	}
	h := headers[0]
	if h.attributes&attrControl == 0 {
		return Marker{}, corrupt("a transaction marker in a batch that is not a control batch (attributes %#x)", h.attributes)
	}
	m := Marker{ProducerID: h.producerID, ProducerEpoch: h.producerEpoch}
	var seen bool
	var bad error
	err = eachRecord(batch, h, func(_ int64, r parsedRecord) {
		if seen || bad != nil {
			return
		}
		seen = true
		if !r.hasKey || len(r.key) < controlKeySize || len(r.value) < markerValueSize {
			bad = corrupt("control record of %d key and %d value bytes, want at least %d and %d", len(r.key), len(r.value), controlKeySize, markerValueSize)
			return
		}
		switch t := binary.BigEndian.Uint16(r.key[2:]); t {
		case controlTypeCommit:
			m.Commit = true
		case controlTypeAbort:
		default:
			bad = corrupt("control record of type %d, want ABORT (0) or COMMIT (1)", t)
			return
		}
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.value[2:]))
	})
	if err != nil {
		return Marker{}, err
	}
	if bad != nil {
		return Marker{}, bad
	}
	if !seen {
		return Marker{}, fmt.Errorf("%w: a control batch without a record", ErrCorruptMessage)
	}
	return m, nil
}
