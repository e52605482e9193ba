package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// The forward RPC lets a broker on a follower reach the leader: it applies
// log entries (register, deregister, commit chunks), renews registrations,
// asks for leadership, joins and reports its log end (quorum.go), and
// carries the quorum's requests. Each message is a 4-byte big-endian
// length and a JSON body; a connection carries requests and responses in
// turn. A node that does not lead answers not_leader with the leader it
// knows, if any.

// Forward operations.
const (
	fwdApply    = "apply"
	fwdRenew    = "renew"
	fwdCampaign = "campaign"
	// fwdReadIndex confirms leadership and returns the commit index.
	fwdReadIndex = "read_index"
	// fwdJoin is a node's periodic report of its log end (Index) to the
	// leader, which adds it as a non-voter at Addr when it is not in the
	// configuration: how an observer joins, and joins again.
	fwdJoin = "join"
	// fwdLeave removes an observer that stops from the configuration.
	fwdLeave = "leave"
	// fwdDescribeQuorum, fwdAddVoter and fwdRemoveVoter are the
	// coord.Quorum calls of a node that does not lead.
	fwdDescribeQuorum = "describe_quorum"
	fwdAddVoter       = "add_voter"
	fwdRemoveVoter    = "remove_voter"
)

// maxFrame bounds a forward message.
const maxFrame = 64 << 20

// defaultForwardTimeout bounds a forward request whose ctx has no deadline.
const defaultForwardTimeout = 10 * time.Second

// fwdRequest is a forward RPC request.
type fwdRequest struct {
	Op string `json:"op"`
	// Cmd is the log entry of apply.
	Cmd *command `json:"cmd,omitempty"`
	// Broker is the registration of renew.
	Broker coord.Broker `json:"broker,omitzero"`
	// From is the node asking for leadership (campaign), joining,
	// reporting or leaving.
	From coord.BrokerID `json:"from,omitempty"`
	// Addr is the Raft address of the node joining.
	Addr string `json:"addr,omitempty"`
	// Index is the last log index of the node reporting (join).
	Index uint64 `json:"index,omitempty"`
	// Voter is the broker of add_voter and remove_voter.
	Voter coord.BrokerID `json:"voter,omitempty"`
	// TimeoutMs is how long the caller waits.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// fwdResponse is a forward RPC response.
type fwdResponse struct {
	// Code and Msg describe the error, if any (see wireCodes).
	Code   string       `json:"code,omitempty"`
	Msg    string       `json:"msg,omitempty"`
	Broker coord.Broker `json:"broker,omitzero"`
	Epoch  int64        `json:"epoch,omitempty"`
	// Index is the log index of an applied entry.
	Index uint64 `json:"index,omitempty"`
	// ProducerIDs is the block reserved by an allocate_producer_ids entry.
	ProducerIDs coord.ProducerIDBlock `json:"producer_ids,omitzero"`
	// ProducerIDKey is the key a producer_id_key entry returned.
	ProducerIDKey []byte `json:"producer_id_key,omitempty"`
	// Replaced is the broker epoch a register entry replaced.
	Replaced int64 `json:"replaced,omitempty"`
	// ACLs are the ACLs a delete_acls entry removed.
	ACLs []coord.ACL `json:"acls,omitempty"`
	// Configs are the configs an alter_broker_configs entry wrote.
	Configs map[string]string `json:"configs,omitempty"`
	// Bases are the epoch bases in force once the entry was applied
	// (applyResult.Bases).
	Bases epochBases `json:"bases,omitzero"`
	// Leader is the Raft address of the leader, as a node that does not
	// lead knows it, with a not_leader answer.
	Leader string `json:"leader,omitempty"`
	// Quorum is the answer of describe_quorum.
	Quorum *coord.QuorumState `json:"quorum,omitempty"`
}

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err = w.Write(buf)
	return err
}

func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("forward frame of %d bytes exceeds %d", n, maxFrame)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// call sends req to the node at addr and returns its response; an error
// answer comes back as a *remoteError.
func (b *Backend) call(ctx context.Context, addr string, req fwdRequest) (fwdResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultForwardTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	req.TimeoutMs = time.Until(deadline).Milliseconds()
	c, err := b.mux.dialProto(ctx, addr, protoForward)
	if err != nil {
		return fwdResponse{}, err
	}
	defer c.Close()
	// Closing the connection when ctx ends unblocks the read below.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(deadline)
	if err := writeFrame(c, req); err != nil {
		return fwdResponse{}, fmt.Errorf("forward %s to %s: %w", req.Op, addr, err)
	}
	var resp fwdResponse
	if err := readFrame(bufio.NewReader(c), &resp); err != nil {
		if ctx.Err() != nil {
			return fwdResponse{}, ctx.Err()
		}
		return fwdResponse{}, fmt.Errorf("forward %s to %s: %w", req.Op, addr, err)
	}
	if resp.Code != "" || resp.Msg != "" {
		return resp, &remoteError{Code: resp.Code, Msg: resp.Msg}
	}
	return resp, nil
}

// forwardConn is one forward RPC connection that a node's member loop
// keeps open for its periodic reports (a dial, and with raft.ssl.* a TLS
// handshake, per report would cost the leader more than the report). It
// redials when the target changes or after an error; its owner closes it.
type forwardConn struct {
	mux  *mux
	addr string
	c    net.Conn
	r    *bufio.Reader
}

// roundTrip sends req to the node at addr and returns its response; an
// error answer comes back as a *remoteError.
func (fc *forwardConn) roundTrip(ctx context.Context, addr string, req fwdRequest) (fwdResponse, error) {
	if fc.c != nil && fc.addr != addr {
		fc.close()
	}
	if fc.c == nil {
		c, err := fc.mux.dialProto(ctx, addr, protoForward)
		if err != nil {
			return fwdResponse{}, err
		}
		fc.c, fc.addr, fc.r = c, addr, bufio.NewReader(c)
	}
	c := fc.c
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		req.TimeoutMs = time.Until(deadline).Milliseconds()
		c.SetDeadline(deadline)
	}
	var resp fwdResponse
	err := writeFrame(c, req)
	if err == nil {
		err = readFrame(fc.r, &resp)
	}
	if err != nil {
		fc.close()
		if ctx.Err() != nil {
			return fwdResponse{}, ctx.Err()
		}
		return fwdResponse{}, fmt.Errorf("forward %s to %s: %w", req.Op, addr, err)
	}
	if resp.Code != "" || resp.Msg != "" {
		return resp, &remoteError{Code: resp.Code, Msg: resp.Msg}
	}
	return resp, nil
}

// close closes the connection, if any.
func (fc *forwardConn) close() {
	if fc.c != nil {
		fc.c.Close()
		fc.c, fc.r = nil, nil
	}
}

// serveForward answers forward requests on c until it is closed or idle.
func (b *Backend) serveForward(c net.Conn) {
	// The listener accepts before Open has started the Raft node: a
	// request that comes that early waits for it.
	select {
	case <-b.opened:
	case <-b.closing:
		return
	}
	r := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		var req fwdRequest
		if err := readFrame(r, &req); err != nil {
			return
		}
		timeout := time.Duration(req.TimeoutMs) * time.Millisecond
		if timeout <= 0 || timeout > defaultForwardTimeout {
			timeout = defaultForwardTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		resp := b.handleForward(ctx, req)
		cancel()
		c.SetWriteDeadline(time.Now().Add(timeout))
		if err := writeFrame(c, resp); err != nil {
			return
		}
	}
}

// handleForward executes one forward request on this node.
func (b *Backend) handleForward(ctx context.Context, req fwdRequest) fwdResponse {
	var resp fwdResponse
	var err error
	switch req.Op {
	case fwdApply:
		if req.Cmd == nil {
			err = fmt.Errorf("forward apply: no command")
			break
		}
		var res applyResult
		res, err = b.applyLocal(ctx, req.Cmd)
		resp.Broker, resp.Epoch, resp.Index, resp.ProducerIDs, resp.Replaced = res.Broker, res.Epoch, res.Index, res.ProducerIDs, res.Replaced
		resp.ACLs, resp.Configs, resp.ProducerIDKey, resp.Bases = res.ACLs, res.Configs, res.ProducerIDKey, res.Bases
	case fwdRenew:
		err = b.renewLocal(req.Broker)
	case fwdCampaign:
		err = b.campaignRequest(req.From)
	case fwdReadIndex:
		lead := b.currentLead()
		if lead == nil {
			err = errNotLeader
			break
		}
		resp.Index, err = b.readIndex(ctx, lead)
	case fwdJoin:
		err = b.joinRequest(ctx, req.From, req.Addr, req.Index)
	case fwdLeave:
		err = b.leaveRequest(ctx, req.From)
	case fwdDescribeQuorum, fwdAddVoter, fwdRemoveVoter:
		lead := b.currentLead()
		if lead == nil {
			err = errNotLeader
			break
		}
		switch req.Op {
		case fwdDescribeQuorum:
			var state coord.QuorumState
			state, err = b.describeQuorumLocal(ctx, lead)
			resp.Quorum = &state
		case fwdAddVoter:
			err = b.addVoterLocal(ctx, lead, req.Voter)
		default:
			err = b.removeVoterLocal(ctx, lead, req.Voter)
		}
	default:
		err = fmt.Errorf("forward: unknown op %q", req.Op)
	}
	if err != nil {
		if errorCode(err) == "" {
			err = translate("leader", err)
		}
		resp.Code, resp.Msg = errorCode(err), err.Error()
		if resp.Code == "not_leader" {
			addr, _ := b.raft.LeaderWithID()
			resp.Leader = string(addr)
		}
	}
	return resp
}
