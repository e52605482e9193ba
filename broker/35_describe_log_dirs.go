package broker

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
)

// DescribeLogDirs v0..v4 (KIP-113; v2 is flexible, v3 adds the top-level
// error code, v4 the volume's total and usable bytes, KIP-827).
func init() { registerAPI(35, 0, 4, handleDescribeLogDirs) }

// handleDescribeLogDirs describes every log dir of this broker (log.dirs)
// and the replicas it holds, as Kafka's: for each requested partition
// found there (every partition when topics is null) the bytes of its log
// segments, an offset lag of 0 (Kafka reports a lag only for the future
// replica of a move between dirs, which tripod does not make) and
// is_future false; from v4 the total and usable bytes of the file system
// under the dir. An offline dir answers KAFKA_STORAGE_ERROR and no
// partitions. Dirs and partitions come in a stable order.
func handleDescribeLogDirs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var wanted map[string]map[int32]bool
	if r.Topics != nil {
		wanted = map[string]map[int32]bool{}
		for _, rt := range r.Topics {
			if wanted[rt.Topic] == nil {
				wanted[rt.Topic] = map[int32]bool{}
			}
			for _, index := range rt.Partitions {
				wanted[rt.Topic][index] = true
			}
		}
	}
	parts := b.replicas.Partitions()
	slices.SortFunc(parts, func(x, y *replica.Partition) int {
		return cmp.Or(cmp.Compare(x.Topic(), y.Topic()), cmp.Compare(x.Index(), y.Index()))
	})
	for _, dir := range b.cfg.LogDirs {
		sd := kmsg.NewDescribeLogDirsResponseDir()
		sd.Dir = dir
		if abs, err := filepath.Abs(dir); err == nil {
			sd.Dir = abs
		}
		if b.replicas.LogDirs().Offline(filepath.Clean(dir)) {
			sd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, sd)
			continue
		}
		if r.Version >= 4 {
			sd.TotalBytes, sd.UsableBytes = volumeBytes(dir)
		}
		for _, p := range parts {
			if p.LogDir() != filepath.Clean(dir) || (wanted != nil && !wanted[p.Topic()][p.Index()]) {
				continue
			}
			if n := len(sd.Topics); n == 0 || sd.Topics[n-1].Topic != p.Topic() {
				st := kmsg.NewDescribeLogDirsResponseDirTopic()
				st.Topic = p.Topic()
				sd.Topics = append(sd.Topics, st)
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition = p.Index()
			sp.Size = p.Log().Size()
			st := &sd.Topics[len(sd.Topics)-1]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Dirs = append(resp.Dirs, sd)
	}
	return resp, nil, nil
}

// volumeBytes returns the total and usable bytes of the file system
// holding dir, or -1 and -1 if it cannot be asked.
func volumeBytes(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
