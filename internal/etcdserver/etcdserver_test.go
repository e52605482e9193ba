package etcdserver

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestStopRestartKeepsDataAndPorts: a key written before Stop is read back
// after Restart on the same endpoint; while stopped, a call fails by its
// deadline.
func TestStopRestartKeepsDataAndPorts(t *testing.T) {
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("Start: got %v, want nil", err)
	}
	defer s.Close()
	endpoints := s.Endpoints()
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("Put /k: got %v, want nil", err)
	}
	// An open watch stream is what makes etcd's own graceful shutdown
	// wait for seconds; Stop must not.
	_ = client.Watch(ctx, "/never")

	stopped := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: got %v, want nil", err)
	}
	// etcd's own graceful stop waits 6 s (5 s + 2 election timeouts)
	// for an open watch; Stop drops client connections first.
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("Stop with an open watch took %v, want under the 6 s of etcd's graceful stop", took)
	}
	if s.Running() {
		t.Fatalf("Running after Stop: got true, want false")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = client.Get(short, "/k")
	cancelShort()
	if err == nil {
		t.Fatalf("Get while stopped: got nil error, want one")
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: got %v, want nil", err)
	}
	if got := s.Endpoints(); got[0] != endpoints[0] {
		t.Fatalf("Endpoints after Restart: got %v, want %v", got, endpoints)
	}
	resp, err := client.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("Get /k after Restart: got %v, want nil", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get /k after Restart: got %v, want v", resp.Kvs)
	}
}

// TestMinimumLeaseTTL: a lease of 1 s is granted as 1 s, so a session
// timeout of one second is honoured.
func TestMinimumLeaseTTL(t *testing.T) {
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("Start: got %v, want nil", err)
	}
	defer s.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	grant, err := client.Grant(ctx, 1)
	if err != nil {
		t.Fatalf("Grant 1 s: got %v, want nil", err)
	}
	if grant.TTL != 1 {
		t.Fatalf("Grant 1 s: got TTL %d, want 1", grant.TTL)
	}
}
