package security

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

const txnRes = coord.ACLResourceTransactionalID

// TestTransactionRules checks the rules of the transaction coordinator's
// APIs for alice, who may WRITE and DESCRIBE transactional id "tx", WRITE
// topic "t", DESCRIBE topic "t" and READ group "g": each request is let
// through, or denied with Kafka's code, as Kafka's KafkaApis decides.
func TestTransactionRules(t *testing.T) {
	acls := []coord.ACL{
		acl(txnRes, literal, "tx", "User:alice", "*", opWrite, allow),
		acl(topicRes, literal, "t", "User:alice", "*", opWrite, allow),
		acl(groupRes, literal, "g", "User:alice", "*", opRead, allow),
	}
	a := &access{acls: NewACLIndex(AuthorizerConfig{}, acls), principal: "User:alice", host: "127.0.0.1"}

	addPartitions := func(version int16, id string, topics ...string) *kmsg.AddPartitionsToTxnRequest {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID = version, id
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: topic, Partitions: []int32{0, 1}})
		}
		return req
	}
	codes := func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, tp := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range tp.Partitions {
				if c, ok := out[tp.Topic]; ok && c != p.ErrorCode {
					out[tp.Topic] = -1
					continue
				}
				out[tp.Topic] = p.ErrorCode
			}
		}
		return out
	}

	if deny, amend := authorizeAddPartitionsToTxn(a, addPartitions(3, "tx", "t")); deny != nil || amend != nil {
		t.Errorf("AddPartitionsToTxn of an allowed id and topic: got deny=%v, want it let through", deny)
	}
	if deny, _ := authorizeAddPartitionsToTxn(a, addPartitions(3, "other", "t")); deny == nil ||
		codes(deny)["t"] != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn of another id: got %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition", deny)
	}
	deny, _ := authorizeAddPartitionsToTxn(a, addPartitions(3, "tx", "t", "secret"))
	if got := codes(deny); deny == nil || got["t"] != kerr.OperationNotAttempted.Code || got["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn of a denied topic: got %v, want secret TOPIC_AUTHORIZATION_FAILED and t OPERATION_NOT_ATTEMPTED", got)
	}
	if deny, _ := authorizeAddPartitionsToTxn(a, addPartitions(4, "tx")); deny == nil ||
		deny.(*kmsg.AddPartitionsToTxnResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AddPartitionsToTxn v4 from a client: got %v, want CLUSTER_AUTHORIZATION_FAILED", deny)
	}

	offsets := func(id, group string) *kmsg.AddOffsetsToTxnRequest {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.Group = id, group
		return req
	}
	for _, tc := range []struct {
		id, group string
		want      int16
	}{{"tx", "g", 0}, {"other", "g", kerr.TransactionalIDAuthorizationFailed.Code}, {"tx", "h", kerr.GroupAuthorizationFailed.Code}} {
		var got int16
		if deny, _ := authorizeAddOffsetsToTxn(a, offsets(tc.id, tc.group)); deny != nil {
			got = deny.(*kmsg.AddOffsetsToTxnResponse).ErrorCode
		}
		if got != tc.want {
			t.Errorf("AddOffsetsToTxn of %s for %s: got %v, want %v", tc.id, tc.group, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "other"
	if deny, _ := transactionalIDOp(coord.ACLOperationWrite)(a, end); deny == nil || deny.(*kmsg.EndTxnResponse).ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("EndTxn of another id: got %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", deny)
	}
	end.TransactionalID = "tx"
	if deny, _ := transactionalIDOp(coord.ACLOperationWrite)(a, end); deny != nil {
		t.Errorf("EndTxn of an allowed id: got %v, want it let through", deny)
	}

	// WRITE implies DESCRIBE: alice describes tx, not other, and sees
	// only the partitions of topics she may DESCRIBE.
	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"tx", "other"}
	deny, amend := authorizeDescribeTransactions(a, describe)
	if deny != nil || amend == nil || len(describe.TransactionalIDs) != 1 || describe.TransactionalIDs[0] != "tx" {
		t.Fatalf("DescribeTransactions: got deny=%v ids %v, want tx only passed on", deny, describe.TransactionalIDs)
	}
	dresp := kmsg.NewPtrDescribeTransactionsResponse()
	dresp.TransactionStates = []kmsg.DescribeTransactionsResponseTransactionState{{TransactionalID: "tx",
		Topics: []kmsg.DescribeTransactionsResponseTransactionStateTopic{{Topic: "t"}, {Topic: "secret"}}}}
	amend(dresp)
	if len(dresp.TransactionStates) != 2 || len(dresp.TransactionStates[0].Topics) != 1 || dresp.TransactionStates[0].Topics[0].Topic != "t" ||
		dresp.TransactionStates[1].TransactionalID != "other" || dresp.TransactionStates[1].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("DescribeTransactions amended: got %+v, want tx with topic t only and other TRANSACTIONAL_ID_AUTHORIZATION_FAILED", dresp.TransactionStates)
	}

	_, amend = authorizeListTransactions(a, kmsg.NewPtrListTransactionsRequest())
	lresp := kmsg.NewPtrListTransactionsResponse()
	lresp.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{{TransactionalID: "other"}, {TransactionalID: "tx"}}
	amend(lresp)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "tx" {
		t.Errorf("ListTransactions amended: got %+v, want tx only", lresp.TransactionStates)
	}
}
