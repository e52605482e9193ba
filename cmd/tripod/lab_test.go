package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/lab/verify"
)

// TestVerifyFlags checks that bad flags fail with exit code 2 and an error
// naming the flag.
func TestVerifyFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--coord", "consul"}, "--coord"},
		{[]string{"--faults", "kill,flood"}, "--faults"},
		{[]string{"--duration", "10ms"}, "--duration"},
		{[]string{"--producers", "idempotent=2,exactly-once=1"}, "--producers"},
		{[]string{"--producers", "idempotent=0"}, "--producers"},
		{[]string{"--bootstrap", "127.0.0.1:9092", "--faults", "kill"}, "--faults"},
		{[]string{"--coord", "raft", "--zk-connect", "127.0.0.1:2181"}, "--zk-connect"},
		{[]string{"--coord", "zk", "--migrate-to", "zk"}, "--migrate-to"},
		{[]string{"--coord", "zk", "--migrate-to", "consul"}, "--migrate-to"},
		{[]string{"--bootstrap", "127.0.0.1:9092", "--faults", "", "--migrate-to", "etcd"}, "--migrate-to"},
		{[]string{"--coord", "raft", "--migrate-to", "etcd", "--zk-connect", "127.0.0.1:2181"}, "--zk-connect"},
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--session-timeout", "100ms"}, "--session-timeout"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, tc := range cases {
		cmd := newVerifyCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var coded interface{ ExitCode() int }
		if !errors.As(err, &coded) || coded.ExitCode() != verify.ExitFailed || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("verify %v: got %v, want exit code 2 and an error naming %s", tc.args, err, tc.want)
		}
	}
}
