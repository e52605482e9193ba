package security

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// acl builds an ACL for the tables below.
func acl(rt coord.ACLResourceType, pattern coord.ACLPatternType, name, principal, host string, op coord.ACLOperation, perm coord.ACLPermission) coord.ACL {
	return coord.ACL{ResourceType: rt, PatternType: pattern, ResourceName: name, Principal: principal, Host: host, Operation: op, Permission: perm}
}

const (
	topicRes   = coord.ACLResourceTopic
	groupRes   = coord.ACLResourceGroup
	clusterRes = coord.ACLResourceCluster
	literal    = coord.ACLPatternLiteral
	prefixed   = coord.ACLPatternPrefixed
	allow      = coord.ACLPermissionAllow
	denyPerm   = coord.ACLPermissionDeny
	opRead     = coord.ACLOperationRead
	opWrite    = coord.ACLOperationWrite
	opDescribe = coord.ACLOperationDescribe
	opAll      = coord.ACLOperationAll
)

// TestACLAuthorizer checks the authorizer's decisions against Kafka's
// AclAuthorizer semantics, one rule at a time.
func TestACLAuthorizer(t *testing.T) {
	alice, bob := "User:alice", "User:bob"
	cases := []struct {
		name      string
		cfg       AuthorizerConfig
		acls      []coord.ACL
		principal string
		host      string
		op        coord.ACLOperation
		rt        coord.ACLResourceType
		resource  string
		want      bool
	}{
		{name: "no acls denies", principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "no acls with allow.everyone.if.no.acl.found allows", cfg: AuthorizerConfig{AllowEveryoneIfNoACLFound: true},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "allow.everyone.if.no.acl.found does not apply when some acl names the resource", cfg: AuthorizerConfig{AllowEveryoneIfNoACLFound: true},
			acls:      []coord.ACL{acl(topicRes, literal, "orders", bob, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "super user allowed everything, even denied", cfg: AuthorizerConfig{SuperUsers: []string{alice}},
			acls:      []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opAll, denyPerm)},
			principal: alice, host: "127.0.0.1", op: coord.ACLOperationDelete, rt: topicRes, resource: "orders", want: true},
		{name: "literal allow", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "literal names one resource", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders2", want: false},
		{name: "literal * names every resource", acls: []coord.ACL{acl(topicRes, literal, "*", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "anything", want: true},
		{name: "prefixed covers names it starts", acls: []coord.ACL{acl(topicRes, prefixed, "ord", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "prefixed does not cover others", acls: []coord.ACL{acl(topicRes, prefixed, "ord", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "payments", want: false},
		{name: "prefixed * is a prefix, not a wildcard", acls: []coord.ACL{acl(topicRes, prefixed, "*", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "other resource type does not apply", acls: []coord.ACL{acl(groupRes, literal, "orders", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "other principal does not match", acls: []coord.ACL{acl(topicRes, literal, "orders", bob, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "User:* matches every principal", acls: []coord.ACL{acl(topicRes, literal, "orders", "User:*", "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "host must match", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "10.0.0.1", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "host matches exactly", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "127.0.0.1", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "deny wins over allow", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opRead, allow),
			acl(topicRes, prefixed, "or", "User:*", "127.0.0.1", opRead, denyPerm)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "deny of ALL denies every operation", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opWrite, allow),
			acl(topicRes, literal, "*", alice, "*", opAll, denyPerm)},
			principal: alice, host: "127.0.0.1", op: opWrite, rt: topicRes, resource: "orders", want: false},
		{name: "deny of another operation does not deny", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opAll, allow),
			acl(topicRes, literal, "orders", alice, "*", opWrite, denyPerm)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: true},
		{name: "deny of READ does not deny the DESCRIBE READ implies", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opDescribe, allow),
			acl(topicRes, literal, "orders", alice, "*", opRead, denyPerm)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: true},
		{name: "ALL allows every operation", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opAll, allow)},
			principal: alice, host: "127.0.0.1", op: coord.ACLOperationAlterConfigs, rt: topicRes, resource: "orders", want: true},
		{name: "READ implies DESCRIBE", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opRead, allow)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: true},
		{name: "WRITE implies DESCRIBE", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opWrite, allow)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: true},
		{name: "DELETE implies DESCRIBE", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", coord.ACLOperationDelete, allow)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: true},
		{name: "ALTER implies DESCRIBE", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", coord.ACLOperationAlter, allow)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: true},
		{name: "DESCRIBE does not imply READ", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opDescribe, allow)},
			principal: alice, host: "127.0.0.1", op: opRead, rt: topicRes, resource: "orders", want: false},
		{name: "CREATE does not imply DESCRIBE", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", coord.ACLOperationCreate, allow)},
			principal: alice, host: "127.0.0.1", op: opDescribe, rt: topicRes, resource: "orders", want: false},
		{name: "ALTER_CONFIGS implies DESCRIBE_CONFIGS", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", coord.ACLOperationAlterConfigs, allow)},
			principal: alice, host: "127.0.0.1", op: coord.ACLOperationDescribeConfigs, rt: topicRes, resource: "orders", want: true},
		{name: "cluster action on the cluster", acls: []coord.ACL{acl(clusterRes, literal, ClusterResource, "User:broker", "*", coord.ACLOperationClusterAction, allow)},
			principal: "User:broker", host: "127.0.0.1", op: coord.ACLOperationClusterAction, rt: clusterRes, resource: ClusterResource, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewACLIndex(c.cfg, c.acls)
			if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.resource); got != c.want {
				t.Fatalf("authorize(%s from %s, %v %v:%s): got %v, want %v", c.principal, c.host, c.op, c.rt, c.resource, got, c.want)
			}
		})
	}
}

// TestAuthorizeByResourceType checks "may op some resource of the type"
// (KIP-679) against Kafka's rules: an ALLOW counts unless a DENY covers
// it.
func TestAuthorizeByResourceType(t *testing.T) {
	alice := "User:alice"
	cases := []struct {
		name string
		cfg  AuthorizerConfig
		acls []coord.ACL
		want bool
	}{
		{name: "nothing", want: false},
		{name: "super user", cfg: AuthorizerConfig{SuperUsers: []string{alice}}, want: true},
		{name: "allow.everyone.if.no.acl.found with no acls", cfg: AuthorizerConfig{AllowEveryoneIfNoACLFound: true}, want: true},
		{name: "a literal allow", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opWrite, allow)}, want: true},
		{name: "a prefixed allow", acls: []coord.ACL{acl(topicRes, prefixed, "ord", alice, "*", opWrite, allow)}, want: true},
		{name: "an allow of ALL", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opAll, allow)}, want: true},
		{name: "an allow of another operation", acls: []coord.ACL{acl(topicRes, literal, "orders", alice, "*", opRead, allow)}, want: false},
		{name: "a literal allow denied literally", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opWrite, allow), acl(topicRes, literal, "orders", alice, "*", opWrite, denyPerm)}, want: false},
		{name: "a literal allow denied by a prefix", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opWrite, allow), acl(topicRes, prefixed, "o", alice, "*", opWrite, denyPerm)}, want: false},
		{name: "a prefixed allow denied by a shorter prefix", acls: []coord.ACL{
			acl(topicRes, prefixed, "orders", alice, "*", opWrite, allow), acl(topicRes, prefixed, "ord", alice, "*", opWrite, denyPerm)}, want: false},
		{name: "a deny of every topic", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opWrite, allow), acl(topicRes, literal, "*", "User:*", "*", opAll, denyPerm)}, want: false},
		{name: "a deny elsewhere", acls: []coord.ACL{
			acl(topicRes, literal, "orders", alice, "*", opWrite, allow), acl(topicRes, literal, "payments", alice, "*", opWrite, denyPerm)}, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewACLIndex(c.cfg, c.acls)
			if got := a.AuthorizeByResourceType(alice, "127.0.0.1", opWrite, topicRes); got != c.want {
				t.Fatalf("AuthorizeByResourceType: got %v, want %v", got, c.want)
			}
		})
	}
}

// TestDeniedTopicFailsOnlyThatTopic checks filterTopics on a produce of
// two topics, one denied: the request keeps the allowed one, and the
// denied one's partitions are answered TOPIC_AUTHORIZATION_FAILED.
func TestDeniedTopicFailsOnlyThatTopic(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Topics = []kmsg.ProduceRequestTopic{
		{Topic: "allowed", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}},
		{Topic: "denied", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}, {Partition: 3}}},
	}
	a := &access{acls: NewACLIndex(AuthorizerConfig{}, []coord.ACL{acl(topicRes, literal, "allowed", "User:alice", "*", opWrite, allow)}), principal: "User:alice", host: "127.0.0.1"}
	deny, amend := authorizeProduce(a, req)
	if deny != nil || amend == nil {
		t.Fatalf("authorizeProduce: got deny=%v amend=%v, want the handler to run and an amend", deny, amend != nil)
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != "allowed" {
		t.Fatalf("request topics after the rule: got %v, want [allowed]", req.Topics)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	amend(resp)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "denied" || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("amended response: got %+v, want topic denied with 2 partitions", resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.TopicAuthorizationFailed.Code || p.BaseOffset != -1 {
			t.Errorf("partition %d: got error %d base offset %d, want TOPIC_AUTHORIZATION_FAILED and -1", p.Partition, p.ErrorCode, p.BaseOffset)
		}
	}
}

// TestFutureAPIRules checks that the rules authzRules' comment names for
// APIs other work adds fit those APIs' requests and responses: each,
// with no ACL, denies a request naming one topic or resource, and its
// amend answers it with Kafka's code.
func TestFutureAPIRules(t *testing.T) {
	deleteRecords := kmsg.NewPtrDeleteRecordsRequest()
	deleteRecords.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0}}}}
	alterConfigs := kmsg.NewPtrAlterConfigsRequest()
	alterConfigs.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: configResourceTopic, ResourceName: "t"}}
	incremental := kmsg.NewPtrIncrementalAlterConfigsRequest()
	incremental.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: configResourceBroker, ResourceName: "1"}}
	describeProducers := kmsg.NewPtrDescribeProducersRequest()
	describeProducers.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	writeTxnMarkers := kmsg.NewPtrWriteTxnMarkersRequest()
	writeTxnMarkers.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 7, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0}}}}}
	cases := []struct {
		rule authzRule
		req  kmsg.Request
		code func(kmsg.Response) int16
		want *kerr.Error
	}{
		{topics(coord.ACLOperationDelete), deleteRecords, func(r kmsg.Response) int16 {
			p := r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
			if p.LowWatermark != -1 {
				return -1
			}
			return p.ErrorCode
		}, kerr.TopicAuthorizationFailed},
		{configResources(coord.ACLOperationAlterConfigs), alterConfigs, func(r kmsg.Response) int16 {
			return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
		}, kerr.TopicAuthorizationFailed},
		{configResources(coord.ACLOperationAlterConfigs), incremental, func(r kmsg.Response) int16 {
			return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
		}, kerr.ClusterAuthorizationFailed},
		{clusterOp(coord.ACLOperationDescribe), kmsg.NewPtrDescribeLogDirsRequest(), func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeLogDirsResponse).ErrorCode
		}, kerr.ClusterAuthorizationFailed},
		{clusterOp(coord.ACLOperationAlter), kmsg.NewPtrAlterPartitionAssignmentsRequest(), func(r kmsg.Response) int16 {
			return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode
		}, kerr.ClusterAuthorizationFailed},
		{clusterOp(coord.ACLOperationDescribe), kmsg.NewPtrListPartitionReassignmentsRequest(), func(r kmsg.Response) int16 {
			return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode
		}, kerr.ClusterAuthorizationFailed},
		{topics(coord.ACLOperationRead), describeProducers, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		}, kerr.TopicAuthorizationFailed},
		{authorizeWriteTxnMarkers, writeTxnMarkers, func(r kmsg.Response) int16 {
			m := r.(*kmsg.WriteTxnMarkersResponse).Markers[0]
			if m.ProducerID != 7 || m.Topics[0].Topic != "t" || m.Topics[0].Partitions[0].Partition != 0 {
				return -1
			}
			return m.Topics[0].Partitions[0].ErrorCode
		}, kerr.ClusterAuthorizationFailed},
	}
	for _, c := range cases {
		c.req.SetVersion(c.req.MaxVersion())
		a := &access{acls: NewACLIndex(AuthorizerConfig{}, nil), principal: "User:alice", host: "127.0.0.1"}
		resp, amend := c.rule(a, c.req)
		if resp == nil {
			if amend == nil {
				t.Errorf("%s: allowed with no acls, want denied", kmsg.NameForKey(c.req.Key()))
				continue
			}
			resp = c.req.ResponseKind()
			amend(resp)
		}
		if got := c.code(resp); got != c.want.Code {
			t.Errorf("%s: got code %d, want %v", kmsg.NameForKey(c.req.Key()), got, c.want)
		}
	}
}

// BenchmarkAuthorize measures one decision over 1000 topic ACLs of 100
// principals, the shape of a busy cluster's ACLs.
func BenchmarkAuthorize(b *testing.B) {
	var acls []coord.ACL
	for i := range 1000 {
		acls = append(acls, acl(topicRes, literal, fmt.Sprintf("topic-%d", i), fmt.Sprintf("User:u%d", i%100), "*", opRead, allow))
	}
	a := NewACLIndex(AuthorizerConfig{}, acls)
	for b.Loop() {
		if !a.Authorize("User:u42", "127.0.0.1", opDescribe, topicRes, "topic-542") {
			b.Fatal("denied, want allowed")
		}
	}
}
