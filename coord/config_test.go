package coord

import (
	"strings"
	"testing"
)

// TestValidateRaftMembers: a voter, a lone broker and an observer with a
// reachable raft.listen are accepted; an observer without raft.listen,
// with an unspecified host or with a voter's address, and voters sharing
// an address, are refused with an error naming the key.
func TestValidateRaftMembers(t *testing.T) {
	voters := map[BrokerID]string{1: "10.0.0.1:9192", 2: "10.0.0.2:9192", 3: "10.0.0.3:9192"}
	for _, tc := range []struct {
		name    string
		id      BrokerID
		listen  string
		voters  map[BrokerID]string
		wantErr string // "" when valid
	}{
		{name: "voter", id: 2, voters: voters},
		{name: "voter listening on all interfaces", id: 2, listen: "0.0.0.0:9192", voters: voters},
		{name: "lone broker", id: 1, listen: "127.0.0.1:9192"},
		{name: "lone broker without raft.listen", id: 1, wantErr: "raft.listen: required"},
		{name: "observer", id: 4, listen: "10.0.0.4:9192", voters: voters},
		{name: "observer on a free port", id: 4, listen: "127.0.0.1:0", voters: voters},
		{name: "observer without raft.listen", id: 4, voters: voters, wantErr: "raft.listen: required for broker.id 4, which is not among raft.voters"},
		{name: "observer on all interfaces", id: 4, listen: "0.0.0.0:9192", voters: voters, wantErr: "needs a host the voters can reach"},
		{name: "observer without a host", id: 4, listen: ":9192", voters: voters, wantErr: "needs a host the voters can reach"},
		{name: "observer without a port", id: 4, listen: "10.0.0.4", voters: voters, wantErr: "raft.listen \"10.0.0.4\": want host:port"},
		{name: "observer at a voter's address", id: 4, listen: "10.0.0.3:9192", voters: voters, wantErr: "the address of voter 3 in raft.voters"},
		{name: "voters sharing an address", id: 1, voters: map[BrokerID]string{1: "10.0.0.1:9192", 2: "10.0.0.1:9192"},
			wantErr: "brokers 1 and 2 have the same address 10.0.0.1:9192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.BrokerID = tc.id
			cfg.RaftListen = tc.listen
			cfg.RaftVoters = tc.voters
			cfg.RaftDir = t.TempDir()
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestLoneRaftVoter: a broker is lone when raft.voters is empty or names
// it alone; an observer of a one-voter cluster is not, nor is a voter of
// several, nor a broker on another backend.
func TestLoneRaftVoter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend string
		voters  map[BrokerID]string
		want    bool
	}{
		{"no voters", "raft", nil, true},
		{"itself alone", "raft", map[BrokerID]string{1: "127.0.0.1:9192"}, true},
		{"observer of one voter", "raft", map[BrokerID]string{2: "127.0.0.1:9192"}, false},
		{"one of three voters", "raft", map[BrokerID]string{1: "a:1", 2: "b:1", 3: "c:1"}, false},
		{"etcd", "etcd", nil, false},
	} {
		cfg := DefaultConfig()
		cfg.Backend = tc.backend
		cfg.RaftVoters = tc.voters
		if got := cfg.LoneRaftVoter(); got != tc.want {
			t.Errorf("%s: LoneRaftVoter got %v, want %v", tc.name, got, tc.want)
		}
	}
}
