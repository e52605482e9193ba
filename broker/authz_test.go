package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/coord"
)

// securedClusterConfig configures a broker of a cluster with an
// authorizer: a CLIENT listener and an inter-broker BROKER listener, both
// SASL_PLAINTEXT with PLAIN (users admin and alice, the brokers logging
// in as admin) and SCRAM-SHA-256, and admin the one super user.
func securedClusterConfig(t testing.TB) func(*config.Config) {
	return func(cfg *config.Config) {
		set(t, cfg, map[string]string{
			"listeners":                            "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0",
			"listener.security.protocol.map":       "CLIENT:SASL_PLAINTEXT,BROKER:SASL_PLAINTEXT",
			"inter.broker.listener.name":           "BROKER",
			"sasl.enabled.mechanisms":              "PLAIN,SCRAM-SHA-256",
			"sasl.mechanism.inter.broker.protocol": "PLAIN",
			"sasl.jaas.config":                     plainJAAS,
			"authorizer.class.name":                "kafka.security.authorizer.AclAuthorizer",
			"super.users":                          "User:admin",
			"offsets.topic.replication.factor":     "2",
		})
	}
}

// clientOf returns a franz-go client of b's CLIENT listener logging in
// with m, closed when the test ends.
func clientOf(t *testing.T, b *Broker, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("CLIENT").String()), kgo.SASL(m)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// adminLogin and bobLogin are the test's two users: admin, a super user
// (PLAIN), and bob (SCRAM-SHA-256), who starts without ACLs.
var (
	adminLogin = plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	bobLogin   = scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()
)

// TestAuthorizerEndToEnd runs two brokers with an authorizer and admin as
// super user, the brokers' own principal:
//  1. admin creates bob's SCRAM credential and a topic replicated on both
//     brokers, and produces to it with acks=all: replication and the
//     controller's requests work;
//  2. bob, without ACLs, sees no topic in Metadata, is refused produce
//     (TOPIC_AUTHORIZATION_FAILED), an idempotent producer id
//     (CLUSTER_AUTHORIZATION_FAILED), fetch and list offsets
//     (TOPIC_AUTHORIZATION_FAILED), the group (GROUP_AUTHORIZATION_FAILED),
//     creating ACLs and describing the cluster
//     (CLUSTER_AUTHORIZATION_FAILED);
//  3. admin grants bob WRITE and READ on the topic and READ on a group
//     with kadm, and describes them; bob then produces idempotently and
//     consumes in the group, on both brokers, without a restart, and
//     Metadata reports his authorized operations on the topic;
//  4. a LeaderAndIsr and a follower fetch forged by bob are refused;
//  5. admin deletes bob's topic ACLs and bob's produce is refused again.
func TestAuthorizerEndToEnd(t *testing.T) {
	brokers := startRaftClusterWith(t, 2, securedClusterConfig(t))
	ctx := testContext(t, 2*time.Minute)
	const topic, groupID = "guarded", "bob-group"

	// 1. admin.
	admin := clientOf(t, brokers[0], adminLogin, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(admin)
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Password: "bob-secret"}}); err != nil || !altered.Ok() {
		t.Fatalf("admin sets bob's credential: %v %v", err, altered.Error())
	}
	if resp, err := adm.CreateTopic(ctx, 1, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("admin creates %s: %v %v", topic, err, resp.Err)
	}
	waitFor(t, ctx, "the ISR to hold both brokers", func() bool {
		p, ok := brokers[0].cache.Topic(topic)
		return ok && len(p.Partitions) == 1 && len(p.Partitions[0].ISR) == 2
	})
	for i := range 3 {
		if err := admin.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("admin-%d", i))).FirstErr(); err != nil {
			t.Fatalf("admin's acks=all produce %d: %v", i, err)
		}
	}
	waitFor(t, ctx, "bob to log in on both brokers", func() bool {
		return loginAt(ctx, brokers[0].ListenerAddr("CLIENT").String(), bobLogin) == nil &&
			loginAt(ctx, brokers[1].ListenerAddr("CLIENT").String(), bobLogin) == nil
	})

	// 2. bob without ACLs.
	bob := clientOf(t, brokers[0], bobLogin, kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	bobAdm := kadm.NewClient(bob)
	if topics, err := bobAdm.ListTopics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("bob lists topics: got %v %v, want none", topics.Names(), err)
	}
	md := bobRequest[*kmsg.MetadataResponse](t, ctx, bob, metadataRequest(topic))
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's metadata of %s: got %+v, want TOPIC_AUTHORIZATION_FAILED", topic, md.Topics)
	}
	if err := bob.ProduceSync(ctx, kgo.StringRecord("bob-denied")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces without ACLs: got %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if code := leaderRequestCode(t, ctx, bob, brokers, topic, fetchRequest(topic, -1)); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob fetches without ACLs: got %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := leaderRequestCode(t, ctx, bob, brokers, topic, listOffsetsRequest(topic)); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob lists offsets without ACLs: got %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	pid := kmsg.NewPtrInitProducerIDRequest()
	if got := bobRequest[*kmsg.InitProducerIDResponse](t, ctx, bob, pid); got.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob's InitProducerId without ACLs: got %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(got.ErrorCode))
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = groupID, []string{groupID}
	if got := bobRequest[*kmsg.FindCoordinatorResponse](t, ctx, bob, fc); len(got.Coordinators) != 1 || got.Coordinators[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's FindCoordinator without ACLs: got %+v, want GROUP_AUTHORIZATION_FAILED", got)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = groupID, "bob-member", 10000, []string{topic}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if got := bobRequest[*kmsg.ConsumerGroupHeartbeatResponse](t, ctx, bob, hb); got.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's ConsumerGroupHeartbeat without ACLs: got %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(got.ErrorCode))
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{groupID}
	if got := bobRequest[*kmsg.ConsumerGroupDescribeResponse](t, ctx, bob, cgd); len(got.Groups) != 1 || got.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's ConsumerGroupDescribe without ACLs: got %+v, want GROUP_AUTHORIZATION_FAILED", got.Groups)
	}
	if got := bobRequest[*kmsg.DescribeClusterResponse](t, ctx, bob, kmsg.NewPtrDescribeClusterRequest()); got.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob describes the cluster: got %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(got.ErrorCode))
	}
	grant := kadm.NewACLs().Allow("User:bob").Topics(topic).Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if results, err := bobAdm.CreateACLs(ctx, grant); err != nil || len(results) == 0 || !errors.Is(results[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob grants himself: got %v %v, want CLUSTER_AUTHORIZATION_FAILED", results, err)
	}

	// 3. admin grants bob the topic and the group.
	groupGrant := kadm.NewACLs().Allow("User:bob").Groups(groupID).Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, b := range []*kadm.ACLBuilder{grant, groupGrant} {
		results, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("admin creates ACLs: %v", err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("admin creates %v %s on %s: %v %s", r.Operation, r.Principal, r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:bob").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("admin describes bob's ACLs: %v %v", described, err)
	}
	var ops []string
	for _, d := range described[0].Described {
		ops = append(ops, fmt.Sprintf("%v:%s:%v", d.Type, d.Name, d.Operation))
	}
	slices.Sort(ops)
	if want := []string{"GROUP:bob-group:READ", "TOPIC:guarded:READ", "TOPIC:guarded:WRITE"}; !slices.Equal(ops, want) {
		t.Fatalf("bob's ACLs described: got %v, want %v", ops, want)
	}
	producer := clientOf(t, brokers[1], bobLogin, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	waitFor(t, ctx, "bob's idempotent produce to be allowed", func() bool {
		return producer.ProduceSync(ctx, kgo.StringRecord("bob-0")).FirstErr() == nil
	})
	// A fresh client: bob's first one caches the denied metadata.
	if topics, err := kadm.NewClient(clientOf(t, brokers[0], bobLogin)).ListTopics(ctx); err != nil || !slices.Equal(topics.Names(), []string{topic}) {
		t.Fatalf("bob lists topics with READ and WRITE: got %v %v, want [%s]", topics.Names(), err, topic)
	}
	withOps := metadataRequest(topic)
	withOps.IncludeTopicAuthorizedOperations = true
	md = bobRequest[*kmsg.MetadataResponse](t, ctx, bob, withOps)
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		t.Fatalf("bob's metadata of %s with READ and WRITE: got %+v", topic, md.Topics)
	}
	if got, want := kadm.DecodeACLOperations(md.Topics[0].AuthorizedOperations), []kadm.ACLOperation{kadm.OpRead, kadm.OpWrite, kadm.OpDescribe}; !slices.Equal(got, want) {
		t.Fatalf("bob's authorized operations on %s: got %v, want %v", topic, got, want)
	}
	// Every broker learns the ACLs from its own watch; the group's
	// coordinator may be one that has not yet.
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d to allow bob to read %s", b.ID(), groupID), func() bool {
			acls, err := b.authz.ACLs(ctx)
			return err == nil && acls.Authorize("User:bob", "127.0.0.1", coord.ACLOperationRead, coord.ACLResourceGroup, groupID)
		})
	}
	consumer := clientOf(t, brokers[0], bobLogin, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(groupID), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for !slices.Contains(got, "bob-0") {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("bob consumes in %s: got %v, want admin's records and bob-0", groupID, got)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("bob consumes in %s: %v", groupID, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("bob commits in %s: %v", groupID, err)
	}

	// 4. forged broker requests from bob.
	for _, b := range brokers {
		lai := kmsg.NewPtrLeaderAndISRRequest()
		lai.ControllerID, lai.ControllerEpoch = b.ID(), forgedEpoch
		cl := clientOf(t, b, bobLogin)
		resp, err := cl.SeedBrokers()[0].Request(ctx, lai)
		if err != nil {
			t.Fatalf("bob's forged LeaderAndIsr to broker %d: %v", b.ID(), err)
		}
		if code := resp.(*kmsg.LeaderAndISRResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("bob's forged LeaderAndIsr to broker %d: got %v, want CLUSTER_AUTHORIZATION_FAILED", b.ID(), kerr.ErrorForCode(code))
		}
	}
	if code := leaderRequestCode(t, ctx, bob, brokers, topic, fetchRequest(topic, 2)); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's follower fetch: got %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	// 5. admin takes the topic back.
	revoke := kadm.NewACLs().Allow("User:bob").AllowHosts().Topics(topic).Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral)
	deleted, err := adm.DeleteACLs(ctx, revoke)
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 2 {
		t.Fatalf("admin deletes bob's topic ACLs: got %+v %v, want two deleted", deleted, err)
	}
	waitFor(t, ctx, "bob's produce to be refused again", func() bool {
		return errors.Is(bob.ProduceSync(ctx, kgo.StringRecord("bob-late")).FirstErr(), kerr.TopicAuthorizationFailed)
	})
	if code := leaderRequestCode(t, ctx, bob, brokers, topic, fetchRequest(topic, -1)); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob fetches after the deletion: got %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestACLAPIsWithoutAuthorizer checks that without an authorizer the ACL
// APIs answer SECURITY_DISABLED, as Kafka does.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, b))
	results, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(results) != 1 || !errors.Is(results[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls: got %v %v, want SECURITY_DISABLED", results, err)
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls: got %v %v, want SECURITY_DISABLED", described, err)
	}
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(deleted) != 1 || !errors.Is(deleted[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteAcls: got %v %v, want SECURITY_DISABLED", deleted, err)
	}
}

// TestCreateACLsRefusesInvalidACLs checks CreateAcls' per-ACL errors: a
// CLUSTER resource not named kafka-cluster and a principal without a
// type get INVALID_REQUEST and are not stored; the valid ACL of the same
// request is.
func TestCreateACLsRefusesInvalidACLs(t *testing.T) {
	b := startBroker(t, authorizedConfig(t))
	ctx := testContext(t, time.Minute)
	cl := newClient(t, b)
	req := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []struct {
		rt        kmsg.ACLResourceType
		name      string
		principal string
	}{
		{kmsg.ACLResourceTypeCluster, "my-cluster", "User:bob"},
		{kmsg.ACLResourceTypeTopic, "t", "bob"},
		{kmsg.ACLResourceTypeTopic, "t", "User:bob"},
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.rt, c.name, kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = c.principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateAcls: %v", err)
	}
	var codes []int16
	for _, r := range resp.Results {
		codes = append(codes, r.ErrorCode)
	}
	if want := []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0}; !slices.Equal(codes, want) {
		t.Fatalf("CreateAcls results: got %v, want %v", codes, want)
	}
	st, err := b.backend.LoadSecurity(ctx)
	if err != nil || len(st.ACLs) != 1 || st.ACLs[0].Principal != "User:bob" || st.ACLs[0].ResourceName != "t" {
		t.Fatalf("stored ACLs: got %v %v, want only bob's READ on t", st.ACLs, err)
	}
}

// authorizedConfig is testConfig with an authorizer whose super user is
// PLAINTEXT's User:ANONYMOUS: every test client is a super user.
func authorizedConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"authorizer.class.name": "tripod", "super.users": "User:ANONYMOUS"})
	return cfg
}

// bobRequest sends req to cl's seed broker and returns its answer.
func bobRequest[R kmsg.Response](t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

// leaderRequestCode sends req (a Fetch or ListOffsets of topic's
// partition 0) to the partition's leader, over a client logged in as
// cl's is, and returns the partition's error code.
func leaderRequestCode(t *testing.T, ctx context.Context, cl *kgo.Client, brokers []*Broker, topic string, req kmsg.Request) int16 {
	t.Helper()
	tp, ok := brokers[0].cache.Topic(topic)
	if !ok {
		t.Fatalf("topic %s: not in the metadata", topic)
	}
	resp, err := cl.Broker(int(tp.Partitions[0].Leader)).Request(ctx, req)
	if err != nil {
		t.Fatalf("%s to the leader: %v", kmsg.NameForKey(req.Key()), err)
	}
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.ListOffsetsResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	}
	t.Fatalf("%s: unexpected answer %+v", kmsg.NameForKey(req.Key()), resp)
	return -1
}

// metadataRequest asks for topic's metadata without auto-creation.
func metadataRequest(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchRequest fetches topic's partition 0 from offset 0 as replicaID
// (-1: a consumer), without waiting.
func fetchRequest(topic string, replicaID int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes = replicaID, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// listOffsetsRequest asks for topic's partition 0 end offset.
func listOffsetsRequest(topic string) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
