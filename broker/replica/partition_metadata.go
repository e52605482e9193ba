package replica

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// partitionMetadataFile is the file in every partition directory that
// names the topic ID the log belongs to (Kafka's partition.metadata,
// KIP-516): "version: 0\ntopic_id: <base64 UUID>\n".
const partitionMetadataFile = "partition.metadata"

// readPartitionTopicID returns the topic ID a partition directory's
// partition.metadata names; ok is false when it has none (a new
// directory, or one a tripod without the file wrote).
func readPartitionTopicID(dir string) (id [16]byte, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return id, false, nil // cut off by a crash before its data reached the disk
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(line, "topic_id: "); found {
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(raw) != 16 {
				return id, false, fmt.Errorf("%s: topic_id %q is not a base64 UUID", filepath.Join(dir, partitionMetadataFile), v)
			}
			copy(id[:], raw)
			return id, true, nil
		}
	}
	return id, false, fmt.Errorf("%s: no topic_id", filepath.Join(dir, partitionMetadataFile))
}

// writePartitionTopicID writes a partition directory's partition.metadata
// through a temporary file and a rename, without an fsync: creating a
// 10 000-partition topic must not cost 10 000 syncs. A crash may leave the
// file missing or empty, which reads as unclaimed, and the next
// LeaderAndIsr writes it again; only a stale log that a crash caught in
// that window would then be kept.
func writePartitionTopicID(dir string, id [16]byte) error {
	path := filepath.Join(dir, partitionMetadataFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "version: 0\ntopic_id: %s\n", base64.RawURLEncoding.EncodeToString(id[:])), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ClaimPartitionDir makes dir the log directory of the partition of
// topic ID id before its log is opened: a directory whose
// partition.metadata names another topic ID holds the log of a deleted
// topic of the same name (its broker was down when the topic was deleted,
// so no StopReplica reached it), and is moved aside, marked for deletion
// (tlog.MarkDeleted), so the new topic starts empty instead of serving
// the old records; a directory without the file gets it. It returns
// where it moved a stale log ("" if it found none), for the caller to
// remove. A zero id (an older controller) claims nothing.
func ClaimPartitionDir(dir string, id [16]byte) (stale string, err error) {
	if id == [16]byte{} {
		return "", nil
	}
	have, ok, err := readPartitionTopicID(dir)
	if err != nil {
		return "", err
	}
	if ok && have == id {
		return "", nil
	}
	if ok {
		if stale, err = tlog.MarkDeleted(dir); err != nil {
			return "", fmt.Errorf("move the stale log %s aside: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return stale, err
	}
	return stale, writePartitionTopicID(dir, id)
}
