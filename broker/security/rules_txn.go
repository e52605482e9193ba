package security

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// The rules of the transaction coordinator's APIs, as Kafka's KafkaApis
// authorizes them.

// transactionalIDOp is the rule of an API on one transactional id (its
// request's TransactionalID): op on it, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func transactionalIDOp(op coord.ACLOperation) authzRule {
	return func(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		var id string
		switch r := req.(type) {
		case *kmsg.EndTxnRequest:
			id = r.TransactionalID
		case *kmsg.AddOffsetsToTxnRequest:
			id = r.TransactionalID
		}
		if a.allowed(op, coord.ACLResourceTransactionalID, id) {
			return nil, nil
		}
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
}

// authorizeAddPartitionsToTxn: v0..v3 (a producer) need WRITE on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
// partition) and WRITE on every topic added: if one is denied, its
// partitions are TOPIC_AUTHORIZATION_FAILED and the others
// OPERATION_NOT_ATTEMPTED, nothing is added. v4+ (a partition leader)
// needs CLUSTER_ACTION on the cluster.
func authorizeAddPartitionsToTxn(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	if r.Version >= 4 {
		return clusterOp(coord.ACLOperationClusterAction)(a, req)
	}
	if !a.allowed(coord.ACLOperationWrite, coord.ACLResourceTransactionalID, r.TransactionalID) {
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
	allowed := a.topic(coord.ACLOperationWrite)
	if !slices.ContainsFunc(r.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) bool { return !allowed(t.Topic) }) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range r.Topics {
		code := kerr.OperationNotAttempted.Code
		if !allowed(t.Topic) {
			code = kerr.TopicAuthorizationFailed.Code
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// authorizeAddOffsetsToTxn: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
// (GROUP_AUTHORIZATION_FAILED).
func authorizeAddOffsetsToTxn(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	if !a.allowed(coord.ACLOperationWrite, coord.ACLResourceTransactionalID, r.TransactionalID) {
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
	if !a.group(coord.ACLOperationRead, r.Group) {
		return denyAll(req, kerr.GroupAuthorizationFailed), nil
	}
	return nil, nil
}

// authorizeDescribeTransactions: each transactional id needs DESCRIBE
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it), and the partitions of
// topics the principal may not DESCRIBE are left out of the answer.
func authorizeDescribeTransactions(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.DescribeTransactionsRequest)
	var denied []string
	r.TransactionalIDs = slices.DeleteFunc(r.TransactionalIDs, func(id string) bool {
		if a.allowed(coord.ACLOperationDescribe, coord.ACLResourceTransactionalID, id) {
			return false
		}
		denied = append(denied, id)
		return true
	})
	describe := a.topic(coord.ACLOperationDescribe)
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeTransactionsResponse)
		for i := range dr.TransactionStates {
			st := &dr.TransactionStates[i]
			st.Topics = slices.DeleteFunc(st.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool { return !describe(t.Topic) })
		}
		for _, id := range denied {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			dr.TransactionStates = append(dr.TransactionStates, st)
		}
	}
}

// authorizeListTransactions: the answer lists only the transactional ids
// the principal may DESCRIBE.
func authorizeListTransactions(a *access, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListTransactionsResponse)
		lr.TransactionStates = slices.DeleteFunc(lr.TransactionStates, func(st kmsg.ListTransactionsResponseTransactionState) bool {
			return !a.allowed(coord.ACLOperationDescribe, coord.ACLResourceTransactionalID, st.TransactionalID)
		})
	}
}

// authorizeTxnOffsetCommit: WRITE on the transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), READ on the
// group (else GROUP_AUTHORIZATION_FAILED), READ on each topic, as Kafka's
// handleTxnOffsetCommitRequest.
func authorizeTxnOffsetCommit(a *access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	if !a.allowed(coord.ACLOperationWrite, coord.ACLResourceTransactionalID, r.TransactionalID) {
		return denyAll(req, kerr.TransactionalIDAuthorizationFailed), nil
	}
	return groupThenTopics(coord.ACLOperationRead, coord.ACLOperationRead)(a, req)
}
