package security

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
)

// authzRules says what every API needs of the authorizer, by API key, as
// Kafka's KafkaApis asks it. The broker runs the API's rule
// (Authorizer.Authorize) after its admission check and before the
// handler when an authorizer is configured (acl.go). A
// rule either denies the whole request, returning the response to send
// instead, or lets the handler run, having removed from the request the
// resources it denies and returning amend, which adds their errors (or
// hides what the principal may not see) in the handler's response; so a
// denied topic of a multi-topic request fails that topic only.
//
// Every API the broker registers has a rule (the broker's
// TestEveryAPIHasAnAuthzRule, through HasRule; a key without one is
// denied CLUSTER_AUTHORIZATION_FAILED). An API added later is one line
// here.
var authzRules = map[int16]authzRule{
	0:  authorizeProduce,                                                  // TOPIC WRITE (TRANSACTIONAL_ID WRITE)
	1:  authorizeFetch,                                                    // TOPIC READ; CLUSTER CLUSTER_ACTION from a replica
	2:  topics(coord.ACLOperationDescribe),                                // ListOffsets
	3:  authorizeMetadata,                                                 // TOPIC DESCRIBE; CLUSTER or TOPIC CREATE to auto-create
	4:  clusterOp(coord.ACLOperationClusterAction),                        // LeaderAndIsr
	5:  clusterOp(coord.ACLOperationClusterAction),                        // StopReplica
	6:  clusterOp(coord.ACLOperationClusterAction),                        // UpdateMetadata
	7:  clusterOp(coord.ACLOperationClusterAction),                        // ControlledShutdown
	8:  groupThenTopics(coord.ACLOperationRead, coord.ACLOperationRead),   // OffsetCommit
	9:  authorizeOffsetFetch,                                              // GROUP DESCRIBE, TOPIC DESCRIBE
	10: authorizeFindCoordinator,                                          // GROUP or TRANSACTIONAL_ID DESCRIBE
	11: groupOp(coord.ACLOperationRead),                                   // JoinGroup
	12: groupOp(coord.ACLOperationRead),                                   // Heartbeat
	13: groupOp(coord.ACLOperationRead),                                   // LeaveGroup
	14: groupOp(coord.ACLOperationRead),                                   // SyncGroup
	15: authorizeDescribeGroups,                                           // GROUP DESCRIBE
	16: authorizeListGroups,                                               // CLUSTER DESCRIBE, else GROUP DESCRIBE per group
	17: unauthenticated,                                                   // SaslHandshake
	18: unauthenticated,                                                   // ApiVersions
	19: authorizeCreateTopics,                                             // CLUSTER or TOPIC CREATE
	20: authorizeDeleteTopics,                                             // TOPIC DELETE
	22: authorizeInitProducerID,                                           // IDEMPOTENT_WRITE, or WRITE on some topic
	23: authorizeOffsetForLeaderEpoch,                                     // CLUSTER CLUSTER_ACTION, else TOPIC DESCRIBE
	24: authorizeAddPartitionsToTxn,                                       // TRANSACTIONAL_ID WRITE, TOPIC WRITE; v4+ CLUSTER CLUSTER_ACTION
	25: authorizeAddOffsetsToTxn,                                          // TRANSACTIONAL_ID WRITE, GROUP READ
	26: transactionalIDOp(coord.ACLOperationWrite),                        // EndTxn
	27: authorizeWriteTxnMarkers,                                          // CLUSTER CLUSTER_ACTION
	28: authorizeTxnOffsetCommit,                                          // TRANSACTIONAL_ID WRITE, GROUP READ, TOPIC READ
	29: clusterOp(coord.ACLOperationDescribe),                             // DescribeAcls
	30: authorizeCreateACLs,                                               // CLUSTER ALTER
	31: authorizeDeleteACLs,                                               // CLUSTER ALTER
	32: configResources(coord.ACLOperationDescribeConfigs),                // DescribeConfigs
	36: unauthenticated,                                                   // SaslAuthenticate
	37: topics(coord.ACLOperationAlter),                                   // CreatePartitions
	42: authorizeDeleteGroups,                                             // GROUP DELETE
	43: clusterOp(coord.ACLOperationAlter),                                // ElectLeaders
	47: groupThenTopics(coord.ACLOperationDelete, coord.ACLOperationRead), // OffsetDelete
	48: clusterOp(coord.ACLOperationDescribeConfigs),                      // DescribeClientQuotas
	49: authorizeAlterClientQuotas,                                        // CLUSTER ALTER_CONFIGS
	50: clusterOp(coord.ACLOperationDescribe),                             // DescribeUserScramCredentials
	51: authorizeAlterUserScramCredentials,                                // CLUSTER ALTER
	56: clusterOp(coord.ACLOperationClusterAction),                        // AlterPartition
	60: authorizeDescribeCluster,                                          // CLUSTER DESCRIBE
	63: clusterOp(coord.ACLOperationClusterAction),                        // BrokerHeartbeat
	65: authorizeDescribeTransactions,                                     // TRANSACTIONAL_ID DESCRIBE, TOPIC DESCRIBE
	66: authorizeListTransactions,                                         // TRANSACTIONAL_ID DESCRIBE per id
	21: topics(coord.ACLOperationDelete),                                  // DeleteRecords
	35: clusterOp(coord.ACLOperationDescribe),                             // DescribeLogDirs
	45: clusterOp(coord.ACLOperationAlter),                                // AlterPartitionReassignments
	46: clusterOp(coord.ACLOperationDescribe),                             // ListPartitionReassignments
	61: topics(coord.ACLOperationRead),                                    // DescribeProducers
	33: configResources(coord.ACLOperationAlterConfigs),                   // AlterConfigs
	44: configResources(coord.ACLOperationAlterConfigs),                   // IncrementalAlterConfigs
	75: authorizeDescribeTopicPartitions,                                  // TOPIC DESCRIBE
	68: authorizeConsumerGroupHeartbeat,                                   // GROUP READ, TOPIC DESCRIBE of the subscribed names
	69: authorizeConsumerGroupDescribe,                                    // GROUP DESCRIBE
	55: authorizeDescribeQuorum,                                           // CLUSTER DESCRIBE
	80: clusterOp(coord.ACLOperationAlter),                                // AddRaftVoter
	81: clusterOp(coord.ACLOperationAlter),                                // RemoveRaftVoter
}

// authzRule checks one request (see authzRules). deny, when not nil, is
// the whole answer; otherwise the handler runs on the request as the rule
// left it, and amend, when not nil, finishes the handler's response.
type authzRule func(a *access, req kmsg.Request) (deny kmsg.Response, amend func(kmsg.Response))

// access is what a rule checks with: the current ACLs' index, who
// sends the request and from where, and the broker's metadata for rules
// that name topics by ID or auto-create.
type access struct {
	acls      *ACLIndex
	principal string
	host      string
	md        Metadata
}

// Metadata is what the rules need of the broker's metadata: the
// Metadata rule asks whether a topic it is denied would be auto-created,
// and the Metadata and DeleteTopics rules name topics given by ID.
type Metadata interface {
	// TopicName returns the name of the topic with id; ok is false for
	// an unknown id.
	TopicName(id [16]byte) (name string, ok bool)
	// TopicExists reports whether a topic of this name exists.
	TopicExists(name string) bool
	// AutoCreateTopics reports whether the broker creates a topic a
	// Metadata request names (auto.create.topics.enable).
	AutoCreateTopics() bool
	// CheckTopicName returns why name cannot be a topic's, or nil.
	CheckTopicName(name string) error
	// TopicNames returns the names of every topic, sorted.
	TopicNames() []string
}

// allowed reports whether the request may perform op on the resource.
func (a *access) allowed(op coord.ACLOperation, rt coord.ACLResourceType, name string) bool {
	return a.acls.Authorize(a.principal, a.host, op, rt, name)
}

// cluster reports whether the request may perform op on the cluster.
func (a *access) cluster(op coord.ACLOperation) bool {
	return a.allowed(op, coord.ACLResourceCluster, ClusterResource)
}

// topic returns whether the request may perform op on a topic, by name.
func (a *access) topic(op coord.ACLOperation) func(string) bool {
	return func(name string) bool { return a.allowed(op, coord.ACLResourceTopic, name) }
}

// group reports whether the request may perform op on group.
func (a *access) group(op coord.ACLOperation, name string) bool {
	return a.allowed(op, coord.ACLResourceGroup, name)
}

// Authorizer is the broker's authorizer: its configuration and the
// ACLIndex of the latest ACLs the security watch delivered (rebuilt
// when they change). It is safe for concurrent use.
type Authorizer struct {
	cfg    AuthorizerConfig
	sasl   *Server
	logger hclog.Logger

	mu      sync.Mutex
	version int64
	current *ACLIndex
}

// NewAuthorizer returns the authorizer of cfg reading the ACLs from the
// security state s holds, logging to logger, or nil without an
// authorizer.
func NewAuthorizer(cfg AuthorizerConfig, s *Server, logger hclog.Logger) *Authorizer {
	if !cfg.Enabled() {
		return nil
	}
	return &Authorizer{cfg: cfg, sasl: s, logger: logger, version: -1}
}

// ACLs returns the index of the current ACLs. Before the watch has
// delivered them it reads the store (Server.State).
func (z *Authorizer) ACLs(ctx context.Context) (*ACLIndex, error) {
	st, _, err := z.sasl.State(ctx)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.current == nil || st.Version != z.version {
		z.current, z.version = NewACLIndex(z.cfg, st.ACLs), st.Version
	}
	return z.current, nil
}

// Authorize runs the rule of req, a request of API key, sent by
// principal from host (see authzRules). deny, when not nil, is the
// whole answer; otherwise the handler runs on req as the rule left it,
// and amend, when not nil, finishes the handler's response. It blocks
// reading the store only until the watch has delivered a first state.
func (z *Authorizer) Authorize(ctx context.Context, key int16, req kmsg.Request, principal, host string, md Metadata) (deny kmsg.Response, amend func(kmsg.Response)) {
	acls, err := z.ACLs(ctx)
	if err != nil {
		// Without the ACLs nothing can be allowed: the request fails as
		// if denied, with the retriable code the store's failure maps to.
		z.logger.Warn("authorization failed: the ACLs could not be read", "error", err)
		return denyAll(req, kafkaerr.SecurityStore.Error(err)), nil
	}
	deny, amend = Check(acls, key, req, principal, host, md)
	if deny != nil && z.logger.IsDebug() {
		z.logger.Debug("request denied", "api", kmsg.NameForKey(key), "principal", principal, "host", host)
	}
	return deny, amend
}

// Check runs the rule of req, a request of API key, against acls, as
// Authorize does; a key without a rule is denied
// CLUSTER_AUTHORIZATION_FAILED.
func Check(acls *ACLIndex, key int16, req kmsg.Request, principal, host string, md Metadata) (deny kmsg.Response, amend func(kmsg.Response)) {
	rule, ok := authzRules[key]
	if !ok {
		return denyAll(req, kerr.ClusterAuthorizationFailed), nil
	}
	return rule(&access{acls: acls, principal: principal, host: host, md: md}, req)
}

// HasRule reports whether the API of key has an authorization rule.
func HasRule(key int16) bool {
	_, ok := authzRules[key]
	return ok
}

// unauthenticated is the rule of the APIs a client sends before it has
// authenticated: ApiVersions and SASL's.
func unauthenticated(*access, kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return nil, nil }

// clusterOp is the rule of an API that needs op on the cluster: a denied
// request gets CLUSTER_AUTHORIZATION_FAILED (denyAll).
func clusterOp(op coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		if a.cluster(op) {
			return nil, nil
		}
		return denyAll(req, kerr.ClusterAuthorizationFailed), nil
	}
}

// authorizeAlterClientQuotas: ALTER_CONFIGS on the cluster, else every
// entry is answered CLUSTER_AUTHORIZATION_FAILED, as Kafka's
// AlterClientQuotasRequest.getErrorResponse does.
func authorizeAlterClientQuotas(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationAlterConfigs) {
		return nil, nil
	}
	r := req.(*kmsg.AlterClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range r.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, p := range e.Entity {
			d := kmsg.NewAlterClientQuotasResponseEntryEntity()
			d.Type, d.Name = p.Type, p.Name
			re.Entity = append(re.Entity, d)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

// authorizeWriteTxnMarkers: only a transaction coordinator, with
// CLUSTER_ACTION on the cluster, writes markers; anyone else gets
// CLUSTER_AUTHORIZATION_FAILED on every partition of every marker, as
// Kafka's WriteTxnMarkersRequest.getErrorResponse answers (the response
// has no request-wide error code).
func authorizeWriteTxnMarkers(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationClusterAction) {
		return nil, nil
	}
	r := req.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

// topics is the rule of an API that needs op on each topic it names in
// its Topics (each with a string Topic): a denied topic is taken out of
// the request and answered with TOPIC_AUTHORIZATION_FAILED (for each of
// its partitions when the response has them).
func topics(op coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		return nil, filterTopics(req, a.topic(op), kerr.TopicAuthorizationFailed)
	}
}

// groupOp is the rule of a group API (whose request names one Group)
// that needs op on the group: a denied request gets
// GROUP_AUTHORIZATION_FAILED.
func groupOp(op coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		if a.group(op, reflect.ValueOf(req).Elem().FieldByName("Group").String()) {
			return nil, nil
		}
		return denyAll(req, kerr.GroupAuthorizationFailed), nil
	}
}

// groupThenTopics is the rule of an API on a group's offsets (whose
// request names one Group and Topics): groupOp on the group, then topics
// with topicOp.
func groupThenTopics(groupOp, topicOp coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		if !a.group(groupOp, reflect.ValueOf(req).Elem().FieldByName("Group").String()) {
			return denyAll(req, kerr.GroupAuthorizationFailed), nil
		}
		return nil, filterTopics(req, a.topic(topicOp), kerr.TopicAuthorizationFailed)
	}
}

// authorizeProduce: a transactional produce needs WRITE on its
// transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
// partition), each topic WRITE. As Kafka since KIP-679, idempotent
// batches need nothing more: a producer with WRITE on a topic may write
// idempotently to it (InitProducerId checks IDEMPOTENT_WRITE).
func authorizeProduce(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.ProduceRequest)
	if r.TransactionID != nil && !a.allowed(coord.ACLOperationWrite, coord.ACLResourceTransactionalID, *r.TransactionID) {
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
	return nil, filterTopics(req, a.topic(coord.ACLOperationWrite), kerr.TopicAuthorizationFailed)
}

// authorizeFetch: a follower's fetch (a replica id) needs CLUSTER_ACTION
// on the cluster, else every partition gets TOPIC_AUTHORIZATION_FAILED,
// as in Kafka; a consumer's needs READ on each topic. A fetch left with
// no topic is answered at once rather than waiting for data.
func authorizeFetch(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.FetchRequest)
	if r.ReplicaID >= 0 {
		if a.cluster(coord.ACLOperationClusterAction) {
			return nil, nil
		}
		resp := denyAll(req, kerr.TopicAuthorizationFailed).(*kmsg.FetchResponse)
		resp.ErrorCode = 0 // the partitions say it
		return resp, nil
	}
	had := len(r.Topics)
	amend := filterTopics(req, a.topic(coord.ACLOperationRead), kerr.TopicAuthorizationFailed)
	if had > 0 && len(r.Topics) == 0 {
		resp := r.ResponseKind()
		amend(resp)
		return resp, nil
	}
	return nil, amend
}

// supportedOperations are the operations Kafka reports in a resource
// type's authorized operations (KIP-430), by resource type.
var supportedOperations = map[coord.ACLResourceType][]coord.ACLOperation{
	coord.ACLResourceTopic: {coord.ACLOperationRead, coord.ACLOperationWrite, coord.ACLOperationCreate, coord.ACLOperationDelete,
		coord.ACLOperationAlter, coord.ACLOperationDescribe, coord.ACLOperationDescribeConfigs, coord.ACLOperationAlterConfigs},
	coord.ACLResourceGroup: {coord.ACLOperationRead, coord.ACLOperationDescribe, coord.ACLOperationDelete},
	coord.ACLResourceCluster: {coord.ACLOperationCreate, coord.ACLOperationClusterAction, coord.ACLOperationDescribeConfigs,
		coord.ACLOperationAlterConfigs, coord.ACLOperationIdempotentWrite, coord.ACLOperationAlter, coord.ACLOperationDescribe},
}

// authorizedOperations is the bit field (1 << operation) of the
// operations of supportedOperations the request may perform on the
// resource, as Metadata, DescribeCluster and DescribeGroups report them
// when asked.
func (a *access) authorizedOperations(rt coord.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations[rt] {
		if a.allowed(op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// AllOperations is the bit field of every operation Kafka supports on a
// resource of type rt: the authorized operations Kafka reports without
// an authorizer.
func AllOperations(rt coord.ACLResourceType) int32 {
	var bits int32
	for _, op := range supportedOperations[rt] {
		bits |= 1 << op
	}
	return bits
}

// authorizeDescribeTopicPartitions asks DESCRIBE on each topic before
// the handler pages through them, as Kafka's
// DescribeTopicPartitionsRequestHandler: a named topic it is denied is
// taken out and answered TOPIC_AUTHORIZATION_FAILED (without its id nor
// whether it exists); when the request names none (all topics), the
// request is rewritten to name the topics it may DESCRIBE, from the
// cursor's on, so that the pages hold only those. A cursor whose topic
// is left out moves to the next topic kept, at its first partition,
// which is where Kafka's next page would start. Each topic answered
// reports the principal's authorized operations.
func authorizeDescribeTopicPartitions(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.DescribeTopicPartitionsRequest)
	describe := a.topic(coord.ACLOperationDescribe)
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	if len(r.Topics) == 0 {
		from := ""
		if r.Cursor != nil {
			from = r.Cursor.Topic
		}
		for _, name := range a.md.TopicNames() {
			if name >= from && describe(name) {
				r.Topics = append(r.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
			}
		}
		if len(r.Topics) == 0 {
			return r.ResponseKind(), nil
		}
		if r.Cursor != nil && r.Topics[0].Topic != r.Cursor.Topic {
			r.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: r.Topics[0].Topic}
		}
	} else {
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if describe(t.Topic) {
				kept = append(kept, t)
				continue
			}
			st := kmsg.NewDescribeTopicPartitionsResponseTopic()
			st.Topic, st.ErrorCode = kmsg.StringPtr(t.Topic), kerr.TopicAuthorizationFailed.Code
			denied = append(denied, st)
		}
		r.Topics = kept
		if len(kept) == 0 {
			resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
			resp.Topics = denied
			return resp, nil
		}
	}
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
		for i := range dr.Topics {
			if t := &dr.Topics[i]; t.Topic != nil && t.ErrorCode == 0 {
				t.AuthorizedOperations = a.authorizedOperations(coord.ACLResourceTopic, *t.Topic)
			}
		}
		dr.Topics = append(dr.Topics, denied...)
	}
}

// then returns an amend doing first, when not nil, then second.
func then(first, second func(kmsg.Response)) func(kmsg.Response) {
	if first == nil {
		return second
	}
	return func(resp kmsg.Response) {
		first(resp)
		second(resp)
	}
}

// authorizeMetadata is authorizeMetadataTopics, and reports the cluster's
// and the topics' authorized operations when the request asks (v8+).
func authorizeMetadata(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.MetadataRequest)
	cluster, topics := r.IncludeClusterAuthorizedOperations && r.Version <= 10, r.IncludeTopicAuthorizedOperations && r.Version >= 8
	deny, amend := authorizeMetadataTopics(a, req)
	if deny != nil || (!cluster && !topics) {
		return deny, amend
	}
	return nil, then(amend, func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		if cluster {
			mr.AuthorizedOperations = a.authorizedOperations(coord.ACLResourceCluster, ClusterResource)
		}
		for i := range mr.Topics {
			if t := &mr.Topics[i]; topics && t.Topic != nil && t.ErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.AuthorizedOperations = a.authorizedOperations(coord.ACLResourceTopic, *t.Topic)
			}
		}
	})
}

// authorizeDescribeCluster: DESCRIBE on the cluster, reporting the
// cluster's authorized operations when asked.
func authorizeDescribeCluster(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if deny, _ := clusterOp(coord.ACLOperationDescribe)(a, req); deny != nil {
		return deny, nil
	}
	if !req.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = a.authorizedOperations(coord.ACLResourceCluster, ClusterResource)
	}
}

// authorizeDescribeQuorum: DESCRIBE on the cluster, else the request-wide
// CLUSTER_AUTHORIZATION_FAILED alone, as Kafka's
// DescribeQuorumRequest.getErrorResponse answers: no topic, so that the
// quorum's partition is not named to whom may not see it.
func authorizeDescribeQuorum(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationDescribe) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	return resp, nil
}

// authorizeMetadataTopics: a topic the principal may not DESCRIBE is left
// out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED
// when named (by name or ID); a named topic that does not exist, when the
// request may auto-create it, needs CREATE on the cluster or the topic,
// else it is answered TOPIC_AUTHORIZATION_FAILED, as in Kafka.
func authorizeMetadataTopics(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.MetadataRequest)
	describe := a.topic(coord.ACLOperationDescribe)
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		return nil, func(resp kmsg.Response) {
			mr := resp.(*kmsg.MetadataResponse)
			mr.Topics = slices.DeleteFunc(mr.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && !describe(*t.Topic) })
		}
	}
	autoCreate := a.md.AutoCreateTopics() && (r.Version < 4 || r.AllowAutoTopicCreation)
	mayCreate := func(name string) bool {
		return a.cluster(coord.ACLOperationCreate) || a.allowed(coord.ACLOperationCreate, coord.ACLResourceTopic, name)
	}
	allowed := map[string]bool{}
	var denied []kmsg.MetadataResponseTopic
	kept := r.Topics[:0]
	for _, rt := range r.Topics {
		name, byID := "", rt.Topic == nil
		if byID {
			n, ok := a.md.TopicName(rt.TopicID)
			if !ok {
				kept = append(kept, rt) // UNKNOWN_TOPIC_ID
				continue
			}
			name = n
		} else {
			name = *rt.Topic
		}
		exists := a.md.TopicExists(name)
		if describe(name) && (exists || byID || !autoCreate || name == group.OffsetsTopic || a.md.CheckTopicName(name) != nil || mayCreate(name)) {
			allowed[name] = true
			kept = append(kept, rt)
			continue
		}
		st := kmsg.NewMetadataResponseTopic()
		st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		if byID {
			st.TopicID = rt.TopicID
		} else {
			st.Topic = rt.Topic
		}
		denied = append(denied, st)
	}
	r.Topics = kept
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		// A v0 request left with no topic asks for all of them: only
		// the ones allowed stay.
		mr.Topics = slices.DeleteFunc(mr.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && !allowed[*t.Topic] })
		mr.Topics = append(mr.Topics, denied...)
	}
}

// authorizeOffsetFetch: the group needs DESCRIBE (v8+: each group, else
// that group's GROUP_AUTHORIZATION_FAILED), each named topic DESCRIBE
// (else TOPIC_AUTHORIZATION_FAILED for its partitions); a request for
// all of a group's offsets leaves out the topics the principal may not
// DESCRIBE.
func authorizeOffsetFetch(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.OffsetFetchRequest)
	describe := a.topic(coord.ACLOperationDescribe)
	if r.Version < 8 {
		if !a.group(coord.ACLOperationDescribe, r.Group) {
			return denyAll(req, kerr.GroupAuthorizationFailed), nil
		}
		if r.Topics == nil {
			return nil, func(resp kmsg.Response) {
				or := resp.(*kmsg.OffsetFetchResponse)
				or.Topics = slices.DeleteFunc(or.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !describe(t.Topic) })
			}
		}
		return nil, filterTopics(req, describe, kerr.TopicAuthorizationFailed)
	}
	var deniedGroups []string
	amends := map[string]func(kmsg.Response){}
	kept := r.Groups[:0]
	for _, g := range r.Groups {
		if !a.group(coord.ACLOperationDescribe, g.Group) {
			deniedGroups = append(deniedGroups, g.Group)
			continue
		}
		if g.Topics != nil {
			// filterTopics works on a request; the group's topics
			// are one's Topics.
			probe := &kmsg.OffsetFetchRequest{Version: 7, Topics: make([]kmsg.OffsetFetchRequestTopic, len(g.Topics))}
			for i, t := range g.Topics {
				probe.Topics[i] = kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
			}
			amend := filterTopics(probe, describe, kerr.TopicAuthorizationFailed)
			g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return !describe(t.Topic) })
			if amend != nil {
				amends[g.Group] = amend
			}
		}
		kept = append(kept, g)
	}
	r.Groups = kept
	return nil, func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetFetchResponse)
		for i := range or.Groups {
			g := &or.Groups[i]
			amend, named := amends[g.Group]
			if !named {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !describe(t.Topic) })
				continue
			}
			probe := &kmsg.OffsetFetchResponse{Version: 7}
			amend(probe)
			for _, t := range probe.Topics {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.ErrorCode = p.Partition, -1, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
		}
		for _, name := range deniedGroups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			or.Groups = append(or.Groups, g)
		}
	}
}

// findCoordinatorTransaction is FindCoordinator's key type of a
// transactional id (0 is a group).
const findCoordinatorTransaction = 1

// authorizeFindCoordinator: a group key needs DESCRIBE on the group
// (GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); v4+ fails each denied key.
func authorizeFindCoordinator(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.FindCoordinatorRequest)
	rt, code := coord.ACLResourceGroup, kerr.GroupAuthorizationFailed
	if r.CoordinatorType == findCoordinatorTransaction {
		rt, code = coord.ACLResourceTransactionalID, kerr.TransactionalIDAuthorizationFailed
	}
	if r.Version < 4 {
		if a.allowed(coord.ACLOperationDescribe, rt, r.CoordinatorKey) {
			return nil, nil
		}
		resp := denyAll(req, code).(*kmsg.FindCoordinatorResponse)
		resp.NodeID, resp.Port = -1, -1
		return resp, nil
	}
	var denied []string
	r.CoordinatorKeys = slices.DeleteFunc(r.CoordinatorKeys, func(key string) bool {
		if a.allowed(coord.ACLOperationDescribe, rt, key) {
			return false
		}
		denied = append(denied, key)
		return true
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		fr := resp.(*kmsg.FindCoordinatorResponse)
		for _, key := range denied {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code.Code
			fr.Coordinators = append(fr.Coordinators, c)
		}
	}
}

// authorizeDescribeGroups: each group needs DESCRIBE, else
// GROUP_AUTHORIZATION_FAILED for it; the groups' authorized operations
// are reported when asked (v3+).
func authorizeDescribeGroups(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.DescribeGroupsRequest)
	denied := a.dropUndescribableGroups(&r.Groups)
	if len(denied) == 0 && !r.IncludeAuthorizedOperations {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeGroupsResponse)
		if r.IncludeAuthorizedOperations {
			for i := range dr.Groups {
				dr.Groups[i].AuthorizedOperations = a.authorizedOperations(coord.ACLResourceGroup, dr.Groups[i].Group)
			}
		}
		for _, name := range denied {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			dr.Groups = append(dr.Groups, g)
		}
	}
}

// dropUndescribableGroups removes from groups those the principal may
// not DESCRIBE and returns them, for DescribeGroups and
// ConsumerGroupDescribe to answer GROUP_AUTHORIZATION_FAILED.
func (a *access) dropUndescribableGroups(groups *[]string) (denied []string) {
	*groups = slices.DeleteFunc(*groups, func(g string) bool {
		if a.group(coord.ACLOperationDescribe, g) {
			return false
		}
		denied = append(denied, g)
		return true
	})
	return denied
}

// authorizeConsumerGroupHeartbeat: a member of the consumer group
// protocol (KIP-848) needs READ on its group, else
// GROUP_AUTHORIZATION_FAILED, and DESCRIBE on every topic it subscribes
// to by name, else TOPIC_AUTHORIZATION_FAILED, as Kafka 4 checks them.
func authorizeConsumerGroupHeartbeat(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code *kerr.Error, msg string) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	}
	if !a.group(coord.ACLOperationRead, r.Group) {
		return fail(kerr.GroupAuthorizationFailed, "Not authorized to access group "+r.Group+"."), nil
	}
	var denied []string
	for _, t := range r.SubscribedTopicNames {
		if !a.topic(coord.ACLOperationDescribe)(t) {
			denied = append(denied, t)
		}
	}
	if len(denied) > 0 {
		return fail(kerr.TopicAuthorizationFailed, "Unauthorized topics: "+strings.Join(denied, ", ")+"."), nil
	}
	return nil, nil
}

// authorizeConsumerGroupDescribe: each consumer-protocol group needs
// DESCRIBE, else GROUP_AUTHORIZATION_FAILED for it; the groups'
// authorized operations are reported when asked.
func authorizeConsumerGroupDescribe(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.ConsumerGroupDescribeRequest)
	denied := a.dropUndescribableGroups(&r.Groups)
	if len(denied) == 0 && !r.IncludeAuthorizedOperations {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.ConsumerGroupDescribeResponse)
		if r.IncludeAuthorizedOperations {
			for i := range dr.Groups {
				dr.Groups[i].AuthorizedOperations = a.authorizedOperations(coord.ACLResourceGroup, dr.Groups[i].Group)
			}
		}
		for _, name := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			dr.Groups = append(dr.Groups, g)
		}
	}
}

// authorizeListGroups: DESCRIBE on the cluster lists every group;
// otherwise only the groups the principal may DESCRIBE are listed.
func authorizeListGroups(a *access, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationDescribe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListGroupsResponse)
		lr.Groups = slices.DeleteFunc(lr.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !a.group(coord.ACLOperationDescribe, g.Group) })
	}
}

// authorizeCreateTopics: CREATE on the cluster allows every topic;
// otherwise each needs CREATE on itself, else TOPIC_AUTHORIZATION_FAILED.
func authorizeCreateTopics(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationCreate) {
		return nil, nil
	}
	return nil, filterTopics(req, a.topic(coord.ACLOperationCreate), kerr.TopicAuthorizationFailed)
}

// authorizeDeleteTopics: each topic, by name or (v6+) by ID, needs
// DELETE, else TOPIC_AUTHORIZATION_FAILED; an unknown ID is left to the
// handler (UNKNOWN_TOPIC_ID).
func authorizeDeleteTopics(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.DeleteTopicsRequest)
	del := a.topic(coord.ACLOperationDelete)
	var denied []kmsg.DeleteTopicsResponseTopic
	deny := func(name *string, id [16]byte) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode = name, id, kerr.TopicAuthorizationFailed.Code
		denied = append(denied, st)
	}
	if r.Version < 6 {
		r.TopicNames = slices.DeleteFunc(r.TopicNames, func(name string) bool {
			if del(name) {
				return false
			}
			deny(&name, [16]byte{})
			return true
		})
	} else {
		r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.DeleteTopicsRequestTopic) bool {
			name := t.Topic
			if name == nil {
				n, ok := a.md.TopicName(t.TopicID)
				if !ok {
					return false
				}
				name = &n
			}
			if del(*name) {
				return false
			}
			deny(t.Topic, t.TopicID)
			return true
		})
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		dr.Topics = append(dr.Topics, denied...)
	}
}

// authorizeInitProducerID: a transactional id needs WRITE on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
// IDEMPOTENT_WRITE on the cluster or, as Kafka since KIP-679, WRITE on
// some topic (CLUSTER_AUTHORIZATION_FAILED).
func authorizeInitProducerID(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID != nil {
		if a.allowed(coord.ACLOperationWrite, coord.ACLResourceTransactionalID, *r.TransactionalID) {
			return nil, nil
		}
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
	if a.cluster(coord.ACLOperationIdempotentWrite) ||
		a.acls.AuthorizeByResourceType(a.principal, a.host, coord.ACLOperationWrite, coord.ACLResourceTopic) {
		return nil, nil
	}
	return denyAll(req, kerr.ClusterAuthorizationFailed), nil
}

// authorizeOffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (a
// follower) allows every topic; otherwise (a consumer checking for
// truncation, KIP-320) each topic needs DESCRIBE.
func authorizeOffsetForLeaderEpoch(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationClusterAction) {
		return nil, nil
	}
	return nil, filterTopics(req, a.topic(coord.ACLOperationDescribe), kerr.TopicAuthorizationFailed)
}

// authorizeCreateACLs: ALTER on the cluster, else every creation fails
// with CLUSTER_AUTHORIZATION_FAILED.
func authorizeCreateACLs(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationAlter) {
		return nil, nil
	}
	r := req.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// authorizeDeleteACLs: ALTER on the cluster, else every filter fails
// with CLUSTER_AUTHORIZATION_FAILED.
func authorizeDeleteACLs(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationAlter) {
		return nil, nil
	}
	r := req.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// authorizeAlterUserScramCredentials: ALTER on the cluster, else every
// user named fails with CLUSTER_AUTHORIZATION_FAILED.
func authorizeAlterUserScramCredentials(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(coord.ACLOperationAlter) {
		return nil, nil
	}
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, d := range r.Deletions {
		users = append(users, d.Name)
	}
	for _, u := range r.Upsertions {
		users = append(users, u.Name)
	}
	slices.Sort(users)
	for _, u := range slices.Compact(users) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode = u, kerr.ClusterAuthorizationFailed.Code
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// authorizeDeleteGroups: each group needs DELETE, else
// GROUP_AUTHORIZATION_FAILED for it.
func authorizeDeleteGroups(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.DeleteGroupsRequest)
	var denied []string
	r.Groups = slices.DeleteFunc(r.Groups, func(g string) bool {
		if a.group(coord.ACLOperationDelete, g) {
			return false
		}
		denied = append(denied, g)
		return true
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteGroupsResponse)
		for _, name := range denied {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			dr.Groups = append(dr.Groups, g)
		}
	}
}

// Config resource types (kmsg.ConfigResourceType) the config APIs name.
const (
	configResourceTopic        = 2
	configResourceBroker       = 4
	configResourceBrokerLogger = 8
)

// configResources is the rule of a config API (DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs: Resources of ResourceType and
// ResourceName) that needs op on each resource: a topic's on the topic
// (else TOPIC_AUTHORIZATION_FAILED), a broker's or broker logger's on
// the cluster (else CLUSTER_AUTHORIZATION_FAILED).
func configResources(op coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		resources := reflect.ValueOf(req).Elem().FieldByName("Resources")
		kept := reflect.MakeSlice(resources.Type(), 0, resources.Len())
		type deniedResource struct {
			typ  int8
			name string
			code *kerr.Error
		}
		var denied []deniedResource
		for i := range resources.Len() {
			res := resources.Index(i)
			typ, name := int8(res.FieldByName("ResourceType").Int()), res.FieldByName("ResourceName").String()
			switch {
			case typ == configResourceTopic && !a.allowed(op, coord.ACLResourceTopic, name):
				denied = append(denied, deniedResource{typ, name, kerr.TopicAuthorizationFailed})
			case (typ == configResourceBroker || typ == configResourceBrokerLogger) && !a.cluster(op):
				denied = append(denied, deniedResource{typ, name, kerr.ClusterAuthorizationFailed})
			default:
				kept = reflect.Append(kept, res)
			}
		}
		if len(denied) == 0 {
			return nil, nil
		}
		resources.Set(kept)
		return nil, func(resp kmsg.Response) {
			results := reflect.ValueOf(resp).Elem().FieldByName("Resources")
			for _, d := range denied {
				res := newDefault(results.Type().Elem())
				res.FieldByName("ResourceType").SetInt(int64(d.typ))
				res.FieldByName("ResourceName").SetString(d.name)
				res.FieldByName("ErrorCode").SetInt(int64(d.code.Code))
				msg := d.code.Description
				res.FieldByName("ErrorMessage").Set(reflect.ValueOf(&msg))
				results.Set(reflect.Append(results, res))
			}
		}
	}
}

// denyAll is the response to req denied as a whole with code: its
// top-level ErrorCode, where it has one, and, where the request names
// Topics (each with a string Topic), each of them (or each of its
// partitions) answered with code too.
func denyAll(req kmsg.Request, code *kerr.Error) kmsg.Response {
	resp := req.ResponseKind()
	if ec := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); ec.IsValid() {
		ec.SetInt(int64(code.Code))
	}
	if amend := filterTopics(req, func(string) bool { return false }, code); amend != nil {
		amend(resp)
	}
	return resp
}

// filterTopics takes out of req's Topics (a slice of structs with a
// string Topic and, maybe, Partitions) the topics allowed refuses, and
// returns the amend that answers them in the response's Topics with code:
// on each partition the request named (structs with a Partition, or
// int32s) when the response's topics have Partitions, else on the topic.
// A request without such Topics is left alone (nil amend).
func filterTopics(req kmsg.Request, allowed func(string) bool, code *kerr.Error) func(kmsg.Response) {
	topicsOf := reflect.ValueOf(req).Elem().FieldByName("Topics")
	if !topicsOf.IsValid() || topicsOf.Kind() != reflect.Slice || topicsOf.Type().Elem().Kind() != reflect.Struct {
		return nil
	}
	if f, ok := topicsOf.Type().Elem().FieldByName("Topic"); !ok || f.Type.Kind() != reflect.String {
		return nil
	}
	kept := reflect.MakeSlice(topicsOf.Type(), 0, topicsOf.Len())
	var denied []reflect.Value
	for i := range topicsOf.Len() {
		t := topicsOf.Index(i)
		if allowed(t.FieldByName("Topic").String()) {
			kept = reflect.Append(kept, t)
		} else {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	topicsOf.Set(kept)
	return func(resp kmsg.Response) {
		if resp == nil {
			return // acks=0
		}
		results := reflect.ValueOf(resp).Elem().FieldByName("Topics")
		if !results.IsValid() {
			return
		}
		for _, t := range denied {
			rt := newDefault(results.Type().Elem())
			rt.FieldByName("Topic").SetString(t.FieldByName("Topic").String())
			parts := rt.FieldByName("Partitions")
			if !parts.IsValid() {
				rt.FieldByName("ErrorCode").SetInt(int64(code.Code))
				results.Set(reflect.Append(results, rt))
				continue
			}
			if reqParts := t.FieldByName("Partitions"); reqParts.IsValid() {
				for j := range reqParts.Len() {
					p := reqParts.Index(j)
					if p.Kind() == reflect.Struct {
						p = p.FieldByName("Partition")
					}
					rp := newDefault(parts.Type().Elem())
					rp.FieldByName("Partition").SetInt(p.Int())
					rp.FieldByName("ErrorCode").SetInt(int64(code.Code))
					for _, name := range unknownOffsetFields {
						if f := rp.FieldByName(name); f.IsValid() && f.Kind() == reflect.Int64 {
							f.SetInt(-1)
						}
					}
					parts.Set(reflect.Append(parts, rp))
				}
			}
			results.Set(reflect.Append(results, rt))
		}
	}
}

// unknownOffsetFields are the offsets and times of a partition's answer
// that Kafka gives as -1 when the partition failed.
var unknownOffsetFields = []string{"BaseOffset", "LogAppendTime", "LogStartOffset", "HighWatermark", "LastStableOffset", "LowWatermark", "Offset", "EndOffset", "Timestamp"}

// newDefault returns a new value of the kmsg struct type t with its
// defaults (its Default method).
func newDefault(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if d, ok := p.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return p.Elem()
}
