package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/security"
)

// TestAuthorizerConfig checks the authorizer's properties: any class name
// turns it on, super.users is a ';'-separated list of principals, and
// errors name the key.
func TestAuthorizerConfig(t *testing.T) {
	for _, class := range []string{"kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "tripod"} {
		cfg := config.DefaultConfig()
		if err := cfg.Set("authorizer.class.name", class); err != nil || !cfg.Authorizer.Enabled() {
			t.Errorf("authorizer.class.name=%s: got %v enabled=%v, want enabled", class, err, cfg.Authorizer.Enabled())
		}
	}
	if config.DefaultConfig().Authorizer.Enabled() {
		t.Errorf("the default config has an authorizer, want none")
	}
	cfg := config.DefaultConfig()
	if err := cfg.Set("super.users", " User:admin ; User:CN=broker,O=tripod;"); err != nil {
		t.Fatalf("super.users: %v", err)
	}
	if got, want := strings.Join(cfg.Authorizer.SuperUsers, "|"), "User:admin|User:CN=broker,O=tripod"; got != want {
		t.Errorf("super.users: got %q, want %q", got, want)
	}
	if got, _ := cfg.Get("super.users"); got != "User:admin;User:CN=broker,O=tripod" {
		want := "User:admin;User:CN=broker,O=tripod"
		t.Errorf("Get super.users: got %q, want %q", got, want)
	}
	for key, value := range map[string]string{"super.users": "admin", "allow.everyone.if.no.acl.found": "yes"} {
		cfg := config.DefaultConfig()
		err := cfg.Set(key, value)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Set(%s, %q): got %v, want an error naming the key", key, value, err)
		}
	}
	cfg = config.DefaultConfig()
	cfg.Authorizer.SuperUsers = []string{"User:"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "super.users") {
		t.Errorf("Validate with super user %q: got %v, want an error naming super.users", "User:", err)
	}
}

// TestEveryAPIHasAnAuthzRule checks that every API the broker serves has
// an authorization rule, and that every rule, denying everything, answers
// a request of every version without a panic: the reflection filterTopics
// and denyAll use finds the fields it needs.
func TestEveryAPIHasAnAuthzRule(t *testing.T) {
	b := &Broker{cfg: config.DefaultConfig(), cache: metadata.NewCache(), member: &membership{}}
	for _, key := range supportedKeys() {
		if !security.HasRule(key) {
			t.Errorf("%s (key %d) has no authorization rule in security's authzRules", kmsg.NameForKey(key), key)
			continue
		}
		api := apis[key]
		for v := api.minVersion; v <= api.maxVersion; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			fillNames(req)
			deny, amend := security.Check(security.NewACLIndex(security.AuthorizerConfig{}, nil), key, req, "User:alice", "127.0.0.1", authzMetadata{b})
			if amend != nil {
				resp := req.ResponseKind()
				amend(resp)
			}
			if key == 17 || key == 18 || key == 36 {
				if deny != nil || amend != nil {
					t.Errorf("%s v%d: denied before authentication, want allowed", kmsg.NameForKey(key), v)
				}
				continue
			}
			if deny == nil && amend == nil {
				t.Errorf("%s v%d: allowed with no acls, want denied", kmsg.NameForKey(key), v)
			}
		}
	}
}

// fillNames gives req one named topic with a partition, one group and
// one resource, where it has such fields, so a rule has something to
// deny.
func fillNames(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.FetchRequest:
		r.ReplicaID = -1
		r.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.ListOffsetsRequest:
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.MetadataRequest:
		name := "t"
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	case *kmsg.OffsetCommitRequest:
		r.Group = "g"
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.OffsetFetchRequest:
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups = []string{"g"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.CreateTopicsRequest:
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t"}}
	case *kmsg.DeleteTopicsRequest:
		name := "t"
		r.TopicNames = []string{"t"}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}}
	case *kmsg.CreatePartitionsRequest:
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t"}}
	case *kmsg.OffsetForLeaderEpochRequest:
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.DescribeConfigsRequest:
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	case *kmsg.OffsetDeleteRequest:
		r.Group = "g"
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.ElectLeadersRequest:
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	case *kmsg.CreateACLsRequest:
		r.Creations = []kmsg.CreateACLsRequestCreation{kmsg.NewCreateACLsRequestCreation()}
	case *kmsg.DeleteACLsRequest:
		r.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
	case *kmsg.AlterConfigsRequest:
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.IncrementalAlterConfigsRequest:
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	case *kmsg.DeleteRecordsRequest:
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.DescribeProducersRequest:
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob"}}
	}
}
