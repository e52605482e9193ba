package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// This file applies the controller's requests to the replicas this broker
// holds, each in one place: ApplyLeaderAndIsr (the controller epoch
// accepted, new replicas' logs opened, each partition made leader or
// follower by its replication state, followers truncated and handed to
// the fetchers, the group coordinator told), ApplyStopReplica and
// ApplyUpdateMetadata. Their wire forms, versions and handlers are in
// 04_leader_and_isr.go, 05_stop_replica.go and 06_update_metadata.go; the
// fetchers that then copy from the leaders are in fetcher.go.

// ControllerAnswer is what a broker answered a controller request, as
// the controller must know it: the request's Kafka error code (0,
// STALE_CONTROLLER_EPOCH or STALE_BROKER_EPOCH) and the partitions whose
// replicas answered KAFKA_STORAGE_ERROR (LeaderAndIsr only).
type ControllerAnswer struct {
	Code    int16
	Offline []coord.TopicPartition
}

// ApplyControllerRequest applies a LeaderAndIsr, UpdateMetadata or
// StopReplica request (controller.Request is sealed: these are all its
// types) and returns the answer; anything else (nil) is INVALID_REQUEST.
func (m *Manager) ApplyControllerRequest(ctx context.Context, req controller.Request) ControllerAnswer {
	switch r := req.(type) {
	case *controller.LeaderAndIsrRequest:
		code, codes := m.ApplyLeaderAndIsr(ctx, r)
		ans := ControllerAnswer{Code: code}
		for i, c := range codes {
			if c == kerr.KafkaStorageError.Code {
				ans.Offline = append(ans.Offline, r.Partitions[i].TopicPartition())
			}
		}
		return ans
	case *controller.UpdateMetadataRequest:
		return ControllerAnswer{Code: m.ApplyUpdateMetadata(ctx, r)}
	case *controller.StopReplicaRequest:
		return ControllerAnswer{Code: m.ApplyStopReplica(ctx, r)}
	}
	return ControllerAnswer{Code: kerr.InvalidRequest.Code}
}

// acceptControllerLocked checks who sent a controller request, with
// stateMu held. STALE_CONTROLLER_EPOCH refuses a controller epoch lower
// than the accepted one, the accepted epoch with another controller id,
// and a newer epoch unless the coordination backend names that very
// controller and epoch (BackendController: a request that merely claims
// a high epoch is not taken on trust; handlers first give the backend's
// view the chance to catch up, awaitBackendController). A broker epoch
// of another incarnation is STALE_BROKER_EPOCH. An accepted request
// makes its controller and epoch the accepted ones.
func (m *Manager) acceptControllerLocked(ctx context.Context, controllerID coord.BrokerID, controllerEpoch, brokerEpoch int64) int16 {
	switch {
	case controllerEpoch < m.controllerEpoch:
		return kerr.StaleControllerEpoch.Code
	case controllerEpoch == m.controllerEpoch && m.controllerID != coord.NoBroker:
		if controllerID != m.controllerID {
			m.logger.Warn("refused a controller request naming another controller for the current controller epoch",
				"controller", controllerID, "controller_epoch", controllerEpoch, "accepted_controller", m.controllerID)
			return kerr.StaleControllerEpoch.Code
		}
	default:
		if named := m.member.BackendController(); named.ID != controllerID || named.Epoch != controllerEpoch {
			m.logger.Warn("refused a controller request whose controller and epoch the coordination backend does not name",
				"controller", controllerID, "controller_epoch", controllerEpoch,
				"backend_controller", named.ID, "backend_controller_epoch", named.Epoch)
			return kerr.StaleControllerEpoch.Code
		}
	}
	wait, cancel := context.WithTimeout(ctx, m.cfg.Coord.SessionTimeout)
	defer cancel()
	if !m.member.CheckBrokerEpoch(wait, brokerEpoch) {
		return kerr.StaleBrokerEpoch.Code
	}
	m.controllerEpoch, m.controllerID = controllerEpoch, controllerID
	return 0
}

// ApplyLeaderAndIsr makes this broker leader or follower of each listed
// partition, opening (or creating) its log when it holds no replica yet;
// a partition state older than the one held, or the same, is ignored (a
// new controller's full state repeats every unchanged one: at 100 000
// partitions applying them again took a broker 1.3 s before it got to
// the changes). A leader starts
// tracking its followers; a follower truncates its log as
// replication.truncation says and fetches from its leader (applyRole).
//
// It returns the request's error code and one per partition, in the
// order of r.Partitions: the request's refusal (STALE_CONTROLLER_EPOCH,
// STALE_BROKER_EPOCH) for all, else 0, or KAFKA_STORAGE_ERROR for a
// replica that is offline (its log dir failed) or whose log cannot be
// opened or created; such a replica stays offline until restart, and a
// storage error (a full or failing disk) takes its whole log dir offline.
//
// The slow part comes first: the topic configs the new replicas need
// are loaded once and their logs opened (with producer state recovery)
// in parallel (openReplicas). It holds stateMu throughout, so that a
// later controller request cannot overtake this one, but holds the
// fetchers (deferring their restarts) only while the roles are applied,
// in memory and in the order of r.Partitions: the fetchers keep
// replicating the other partitions during the opens.
func (m *Manager) ApplyLeaderAndIsr(ctx context.Context, r *controller.LeaderAndIsrRequest) (int16, []int16) {
	start := time.Now()
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	locked := time.Since(start)
	codes := make([]int16, len(r.Partitions))
	if code := m.acceptControllerLocked(ctx, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch); code != 0 {
		m.logger.Warn("refused LeaderAndIsr", "controller", r.ControllerID, "controller_epoch", r.ControllerEpoch,
			"broker_epoch", r.BrokerEpoch, "error", kerr.ErrorForCode(code))
		for i := range codes {
			codes[i] = code
		}
		return code, codes
	}
	opening := time.Now()
	opened, configsTook := m.openReplicas(ctx, r.Partitions)
	openTook := time.Since(opening)
	m.fetchers.setLeaders(r.Leaders)
	m.fetchers.hold()
	defer m.fetchers.release()
	self := coord.BrokerID(m.cfg.BrokerID)
	led, followed, ignored, unchanged, offline := 0, 0, 0, 0, 0
	for i, info := range r.Partitions {
		tp := info.TopicPartition()
		p := m.PartitionFor(info.Topic, info.Partition)
		o, isNew := opened[i]
		if m.logDirs.ReplicaOffline(tp) || (p != nil && m.logDirs.PartitionDirOffline(p.dir)) {
			codes[i] = kerr.KafkaStorageError.Code
			offline++
			continue
		}
		if isNew {
			if o.err != nil {
				m.logger.Error("open replica failed: the replica is offline until restart", "partition", tp, "error", o.err)
				m.logDirs.MarkReplicaOffline(tp)
				if dir, derr := m.logDirs.Place(info.Topic, info.Partition); derr == nil && IsStorageError(o.err) {
					m.FailLogDir(filepath.Dir(dir), o.err)
				}
				codes[i] = kerr.KafkaStorageError.Code
				offline++
				continue
			}
			m.dyn.AddReplica(o.p, func() {
				m.replicasMu.Lock()
				m.replicas[tp] = o.p
				m.replicasMu.Unlock()
			})
			p = o.p
		} else {
			switch p.roleChangeOf(info) {
			case roleStale:
				ignored++
				continue
			case roleSame:
				unchanged++
				continue
			}
		}
		m.applyRole(p, info)
		m.roleChanged(p)
		if info.Leader == self {
			led++
		} else {
			followed++
		}
	}
	m.logger.Info("LeaderAndIsr applied", "controller_epoch", r.ControllerEpoch, "leader", led, "follower", followed,
		"stale", ignored, "unchanged", unchanged, "offline", offline, "waited", locked.Round(time.Millisecond),
		"opened", len(opened), "configs_took", configsTook.Round(time.Millisecond), "open_took", openTook.Round(time.Millisecond),
		"took", time.Since(start).Round(time.Millisecond))
	return 0, codes
}

// roleChange is what a LeaderAndIsr state would do to a partition.
type roleChange int

const (
	// roleApplied: the state is to be applied (applyRole).
	roleApplied roleChange = iota
	// roleStale: older than the current one, ignored.
	roleStale
	// roleSame: the very state the partition holds (a new controller's
	// full state repeats every unchanged one), so nothing is to apply.
	roleSame
)

// roleChangeOf says whether a LeaderAndIsr state is older than the one
// the partition's replication state holds (a lower leader epoch, or the
// same with a lower partition epoch), the same as it, or to be applied.
func (p *Partition) roleChangeOf(info controller.PartitionInfo) roleChange {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	leaderEpoch, partitionEpoch := p.rep.LeaderEpoch(), p.rep.PartitionEpoch()
	switch {
	case info.LeaderEpoch < leaderEpoch ||
		(info.LeaderEpoch == leaderEpoch && info.PartitionEpoch < partitionEpoch):
		return roleStale
	case info.LeaderEpoch == leaderEpoch && info.PartitionEpoch == partitionEpoch &&
		replication.ReplicaID(info.Leader) == p.rep.Leader() && info.TopicID == p.topicID &&
		slices.Equal(replicaIDs(info.ISR), p.rep.ISR()) && slices.Equal(replicaIDs(info.Replicas), p.rep.Replicas()):
		return roleSame
	}
	return roleApplied
}

// openedReplica is the outcome of one openReplica: the replica or the
// error.
type openedReplica struct {
	p   *Partition
	err error
}

// maxOpeners bounds the goroutines that open the logs of one
// LeaderAndIsr's new replicas, and those that close the logs at shutdown.
const maxOpeners = 8

// openReplicas opens the replicas that parts need and this broker does
// not hold yet (or holds for a recreated topic, whose old replica it
// removes first), skipping the offline ones, with up to maxOpeners
// goroutines that it waits for. It returns each open's outcome by index
// in parts; a partition listed twice (there should be none) is opened
// for its first state only, and how long finding the new replicas' topic
// configs took. The caller holds stateMu.
func (m *Manager) openReplicas(ctx context.Context, parts []controller.PartitionInfo) (map[int]openedReplica, time.Duration) {
	var todo []int
	seen := map[coord.TopicPartition]bool{}
	var topics []string
	for i, info := range parts {
		tp := info.TopicPartition()
		if seen[tp] || m.logDirs.ReplicaOffline(tp) {
			continue
		}
		p := m.PartitionFor(info.Topic, info.Partition)
		if p != nil && (m.logDirs.PartitionDirOffline(p.dir) || !recreated(p, info)) {
			continue
		}
		if p != nil {
			// The old log goes first: the new one takes its directory.
			m.logger.Info("replacing the log of a recreated topic", "partition", tp)
			m.removeReplica(tp, true)
		}
		seen[tp] = true
		todo = append(todo, i)
		if !slices.Contains(topics, info.Topic) {
			topics = append(topics, info.Topic)
		}
	}
	out := make(map[int]openedReplica, len(todo))
	if len(todo) == 0 {
		return out, 0
	}
	start := time.Now()
	configs := m.heldTopicConfigs(parts)
	maps.Copy(configs, m.dyn.WatchedTopicConfigs(topics))
	topics = slices.DeleteFunc(topics, func(n string) bool { _, ok := configs[n]; return ok })
	maps.Copy(configs, m.TopicConfigs(ctx, topics))
	configsTook := time.Since(start)
	// With several log dirs, dirs are chosen here, one after the other,
	// as the opens did when sequential: logDirs.Place counts each log dir's
	// partitions, so each chosen dir is created at once (an error is the
	// open's to report). With one, there is nothing to choose, and the
	// opens create their dirs in parallel: on a slow disk a mkdir may take
	// milliseconds.
	for _, i := range todo {
		if len(m.cfg.LogDirs) == 1 {
			break
		}
		if dir, err := m.logDirs.Place(parts[i].Topic, parts[i].Partition); err == nil {
			_ = os.MkdirAll(dir, 0o755)
		}
	}
	results := make([]openedReplica, len(todo))
	inParallel(len(todo), maxOpeners, func(j int) {
		info := parts[todo[j]]
		p, err := m.openReplica(info, configs[info.Topic])
		results[j] = openedReplica{p: p, err: err}
	})
	for j, i := range todo {
		out[i] = results[j]
	}
	return out, configsTook
}

// openReplica opens (creating if needed) the log of a partition the
// controller assigned to this broker. It touches no broker state.
func (m *Manager) openReplica(info controller.PartitionInfo, configs map[string]string) (*Partition, error) {
	if m.openReplicaHook != nil {
		m.fetchers.mu.Lock()
		held := m.fetchers.held
		m.fetchers.mu.Unlock()
		m.openReplicaHook(info.TopicPartition(), held)
	}
	dir, err := m.logDirs.Place(info.Topic, info.Partition)
	if err != nil {
		return nil, err
	}
	stale, err := ClaimPartitionDir(dir, info.TopicID)
	if stale != "" {
		m.deleter.add(stale)
		m.logger.Warn("deleted the log of an earlier topic of the same name (its topic ID differs): the topic was deleted while this broker was down",
			"partition", info.TopicPartition(), "dir", dir)
		m.hwCkpt.Forget(info.TopicPartition())
	}
	if err != nil {
		return nil, fmt.Errorf("partition metadata of %s in %s: %w", info.TopicPartition(), dir, err)
	}
	cfg := m.dyn.CurrentConfig()
	rep, err := m.newReplicationState(*cfg, info.TopicPartition(), configs)
	if err != nil {
		return nil, err
	}
	lc := cfg.LogConfig(configs)
	lc.Files = m.files
	l, err := tlog.Open(dir, lc)
	if err != nil {
		return nil, fmt.Errorf("open log of %s in %s: %w", info.TopicPartition(), dir, err)
	}
	p := newPartition(info, l, cfg, configs, m.cfg.BrokerID, rep, m.hwCkpt.Lookup(info.TopicPartition()), &m.followerThrottleSeen)
	p.dir = dir
	if err := m.recoverProducers(p, time.Now()); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuild producer state of %s: %w", info.TopicPartition(), err)
	}
	return p, nil
}

// recreated reports whether info is for a topic of the same name as p's
// but another ID (deleted and created again); a request without an ID is
// taken to mean p's topic.
func recreated(p *Partition, info controller.PartitionInfo) bool {
	return info.TopicID != [16]byte{} && p.topicID != info.TopicID
}

// TopicConfigs reads the config overrides of the named topics from the
// backend; on failure the topics get the broker's defaults.
func (m *Manager) TopicConfigs(ctx context.Context, names []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	if len(names) == 0 {
		return out
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := m.backend.Load(lctx)
	if err != nil {
		m.logger.Warn("load topic configs failed; using broker defaults", "topics", len(names), "error", err)
		return out
	}
	for _, n := range names {
		if t, ok := md.Topics[n]; ok {
			out[n] = t.Config
		}
	}
	return out
}

// heldTopicConfigs returns the config overrides of the topics of parts
// from a replica this broker holds of the same topic ID (a topic's
// partitions share its configs, which the config watch keeps up to date),
// for openReplicas to read from the backend only those of the others.
func (m *Manager) heldTopicConfigs(parts []controller.PartitionInfo) map[string]map[string]string {
	ids := map[string][16]byte{}
	for _, info := range parts {
		ids[info.Topic] = info.TopicID
	}
	out := map[string]map[string]string{}
	for _, p := range m.Partitions() {
		id, ok := ids[p.topic]
		if ok && (id == [16]byte{} || id == p.topicID) {
			out[p.topic] = p.TopicConfigs()
		}
	}
	return out
}

// applyRole makes p leader or follower as info says, feeding the state
// machine and, for a follower, truncating its log and handing it to the
// fetcher of its leader. The caller holds stateMu and has found info
// newer than p's (roleChangeOf); p's replication state then holds it.
func (m *Manager) applyRole(p *Partition, info controller.PartitionInfo) {
	self := coord.BrokerID(m.cfg.BrokerID)
	st := replication.State{
		Leader:         replication.ReplicaID(info.Leader),
		LeaderEpoch:    info.LeaderEpoch,
		PartitionEpoch: info.PartitionEpoch,
		Replicas:       replicaIDs(info.Replicas),
		ISR:            replicaIDs(info.ISR),
	}
	now := time.Now()
	p.appendMu.Lock()
	p.repMu.Lock()
	wasLeader := p.rep.Role() == replication.RoleLeader
	prevLeader, prevEpoch := p.rep.Leader(), p.rep.LeaderEpoch()
	var (
		err       error
		tr        replication.Truncation
		following bool
	)
	if info.Leader == self {
		err = p.rep.BecomeLeader(st, p.log.EndOffset(), p.hw.Load(), now)
	} else {
		tr, err = p.rep.BecomeFollower(st, p.log.EndOffset(), p.hw.Load(), p.log.Epochs())
		following = true
	}
	p.rep.SetLogStart(p.log.StartOffset(), now)
	rd := p.ready()
	p.repMu.Unlock()
	if err != nil {
		p.appendMu.Unlock()
		m.handleReady(p, rd)
		if errors.Is(err, replication.ErrStaleEpoch) {
			m.logger.Debug("stale partition state ignored", "partition", p.Name(), "error", err)
			return
		}
		m.logger.Error("apply partition role failed", "partition", p.Name(), "error", err)
		return
	}
	newEpoch := prevLeader != st.Leader || prevEpoch != st.LeaderEpoch
	if newEpoch {
		p.followGen++
	}
	if following && newEpoch && info.Leader != coord.NoBroker && tr.Offset < p.log.EndOffset() {
		m.truncate(p, tr.Offset, "become follower")
	}
	gen := p.followGen
	p.appendMu.Unlock()
	m.handleReady(p, rd)

	switch {
	case !following:
		m.fetchers.remove(p)
		if !wasLeader || newEpoch {
			m.logger.Debug("leading partition", "partition", p.Name(), "leader_epoch", st.LeaderEpoch,
				"log_end", p.log.EndOffset(), "high_watermark", p.hw.Load())
		}
	case info.Leader == coord.NoBroker:
		m.fetchers.remove(p)
	case newEpoch:
		m.fetchers.assign(p, info.Leader, info.LeaderEpoch, gen, tr)
	}
	p.wakeAll()
}

// truncate cuts p's log at offset as a follower and logs it. The caller
// holds p.appendMu.
func (m *Manager) truncate(p *Partition, offset int64, why string) {
	end := p.log.EndOffset()
	if offset >= end {
		return
	}
	if err := p.log.TruncateTo(offset); err != nil {
		m.logger.Error("truncate follower log failed", "partition", p.Name(), "offset", offset, "error", err)
		m.CheckStorage(p, err)
		return
	}
	m.truncateProducers(p, offset)
	if hw := p.hw.Load(); hw > p.log.EndOffset() {
		p.hw.Store(p.log.EndOffset())
	}
	m.logStartMoved(p)
	m.logger.Info("truncated follower log", "partition", p.Name(), "mode", m.cfg.ReplicationTruncation,
		"offset", p.log.EndOffset(), "log_end", end, "reason", why)
}

// ApplyUpdateMetadata refreshes the metadata cache. A controller that
// starts sends every broker the whole metadata before anything else
// (coord's sendFullState), so the first request of a newer controller
// epoch replaces the cache: topics deleted while this broker was not told
// go. (A broker that rejoins under the same controller also gets the
// whole metadata, but possibly after a partial request, so it is merged.)
// The topics it says were deleted are told to TopicsDeleted.
func (m *Manager) ApplyUpdateMetadata(ctx context.Context, r *controller.UpdateMetadataRequest) int16 {
	start := time.Now()
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if code := m.acceptControllerLocked(ctx, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch); code != 0 {
		m.logger.Warn("refused UpdateMetadata", "controller", r.ControllerID, "controller_epoch", r.ControllerEpoch,
			"broker_epoch", r.BrokerEpoch, "error", kerr.ErrorForCode(code))
		return code
	}
	full := r.ControllerEpoch > m.updateEpoch
	m.updateEpoch = r.ControllerEpoch
	m.cache.Update(r, full)
	m.removeStrays(r.Partitions)
	if len(r.Deleted) > 0 && m.topicsDeleted != nil {
		m.topicsDeleted(r.Deleted)
	}
	if full {
		// The first UpdateMetadata of a controller epoch is that
		// controller's full state: from now on this broker answers
		// Metadata as the new controller sees the cluster.
		m.logger.Info("metadata of a new controller applied", "controller", r.ControllerID,
			"controller_epoch", r.ControllerEpoch, "partitions", len(r.Partitions), "live_brokers", len(r.Live),
			"took", time.Since(start).Round(time.Millisecond))
	}
	return 0
}

// removeStrays deletes this broker's replicas of partitions whose
// replicas, as the controller now tells them, leave this broker out: a
// reassignment moved them away and the StopReplica that should have
// followed was lost with a controller that failed between its commit and
// its requests (a new controller sends every broker the full state, so
// such a replica is found then).
func (m *Manager) removeStrays(parts []controller.PartitionInfo) {
	self := coord.BrokerID(m.cfg.BrokerID)
	for _, info := range parts {
		tp := info.TopicPartition()
		if len(info.Replicas) == 0 || slices.Contains(info.Replicas, self) || m.PartitionFor(tp.Topic, tp.Partition) == nil {
			continue
		}
		m.logger.Info("stray replica deleted: the partition's replicas no longer include this broker", "partition", tp, "replicas", info.Replicas)
		m.removeReplica(tp, true)
	}
}

// ApplyStopReplica stops this broker's replicas of the listed partitions;
// with Delete their logs are removed.
func (m *Manager) ApplyStopReplica(ctx context.Context, r *controller.StopReplicaRequest) int16 {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if code := m.acceptControllerLocked(ctx, r.ControllerID, r.ControllerEpoch, r.BrokerEpoch); code != 0 {
		m.logger.Warn("refused StopReplica", "controller", r.ControllerID, "controller_epoch", r.ControllerEpoch,
			"broker_epoch", r.BrokerEpoch, "error", kerr.ErrorForCode(code))
		return code
	}
	if !r.Delete {
		// The replica stays on disk; it no longer follows anyone.
		for _, tp := range r.Partitions {
			if p := m.PartitionFor(tp.Topic, tp.Partition); p != nil {
				m.fetchers.remove(p)
			}
		}
		return 0
	}
	for _, tp := range r.Partitions {
		m.removeReplica(tp, true)
	}
	return 0
}

// removeReplica forgets a replica, closing (or with deleteLog deleting:
// renaming its directory for the deleter) its log and waking fetches
// waiting on it.
func (m *Manager) removeReplica(tp coord.TopicPartition, deleteLog bool) {
	m.replicasMu.Lock()
	p := m.replicas[tp]
	delete(m.replicas, tp)
	m.replicasMu.Unlock()
	if p == nil {
		return
	}
	m.resign(tp)
	m.fetchers.remove(p)
	p.appendMu.Lock()
	p.followGen++
	p.appendMu.Unlock()
	p.failAcks(replication.ErrNotLeader)
	if deleteLog {
		m.hwCkpt.Forget(tp)
	}
	var err error
	if deleteLog {
		var gone string
		gone, err = p.log.Delete()
		if gone != "" {
			m.deleter.add(gone)
		}
	} else {
		err = p.log.Close()
	}
	if err != nil {
		m.logger.Error("remove partition log failed", "partition", p.Name(), "error", err)
	}
	p.wakeAll()
}

// LeaderFor returns the partition if this broker leads it, with the Kafka
// error code otherwise: KAFKA_STORAGE_ERROR for a replica that is offline
// here (its log dir failed), NOT_LEADER_OR_FOLLOWER for a partition the
// cluster has, or may have as far as a broker knows that has not had the
// controller's metadata yet (a restarted broker), and
// UNKNOWN_TOPIC_OR_PARTITION for one it does not.
func (m *Manager) LeaderFor(topic string, index int32) (*Partition, int16) {
	if m.logDirs.ReplicaOffline(coord.TopicPartition{Topic: topic, Partition: index}) {
		return nil, kerr.KafkaStorageError.Code
	}
	if p := m.PartitionFor(topic, index); p != nil {
		if m.logDirs.PartitionDirOffline(p.dir) {
			return nil, kerr.KafkaStorageError.Code
		}
		if ok, _ := p.Leads(coord.BrokerID(m.cfg.BrokerID)); ok {
			return p, 0
		}
		return nil, kerr.NotLeaderForPartition.Code
	}
	if m.cache.HasPartition(topic, index) {
		return nil, kerr.NotLeaderForPartition.Code
	}
	if !m.cache.IsSynced() {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}

// ReplicaFor returns the partition if this broker holds a replica of it,
// leader or follower, with LeaderFor's error codes otherwise. It serves
// the requests Kafka lets any replica answer: ListOffsets from the
// debugging replica id (-2), which tools such as tripod's console send
// to read each replica's log end offset.
func (m *Manager) ReplicaFor(topic string, index int32) (*Partition, int16) {
	if m.logDirs.ReplicaOffline(coord.TopicPartition{Topic: topic, Partition: index}) {
		return nil, kerr.KafkaStorageError.Code
	}
	if p := m.PartitionFor(topic, index); p != nil {
		if m.logDirs.PartitionDirOffline(p.dir) {
			return nil, kerr.KafkaStorageError.Code
		}
		return p, 0
	}
	return m.LeaderFor(topic, index)
}

// CheckLeaderEpoch compares a client's idea of the current leader epoch
// with this leader's: -1 skips the check, an older one is
// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (the client knows
// of an election this broker has not heard of yet).
func CheckLeaderEpoch(current, leaderEpoch int32) int16 {
	switch {
	case current < 0 || current == leaderEpoch:
		return 0
	case current < leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}
