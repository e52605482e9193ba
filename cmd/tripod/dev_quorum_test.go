package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/freeport"
)

// TestDevVoters checks how many brokers of `tripod dev` vote in the Raft
// quorum: up to 3 unless --voters says, 1..--brokers, none asked of
// ZooKeeper or etcd; and the line that says which.
func TestDevVoters(t *testing.T) {
	for _, c := range []struct {
		coord            string
		brokers, voters  int
		set              bool
		want             int
		wantErr, wantOut string
	}{
		{coord: "raft", brokers: 1, want: 1, wantOut: "raft quorum: broker 1 votes"},
		{coord: "raft", brokers: 3, want: 3, wantOut: "raft quorum: brokers 1,2,3 vote"},
		{coord: "raft", brokers: 5, want: 3, wantOut: "raft quorum: brokers 1,2,3 vote; brokers 4,5 observe (tripod quorum add-voter promotes one)"},
		{coord: "raft", brokers: 5, voters: 1, set: true, want: 1, wantOut: "raft quorum: broker 1 votes; brokers 2,3,4,5 observe (tripod quorum add-voter promotes one)"},
		{coord: "raft", brokers: 5, voters: 5, set: true, want: 5, wantOut: "raft quorum: brokers 1,2,3,4,5 vote"},
		{coord: "raft", brokers: 3, voters: 4, set: true, wantErr: "--voters 4: must be between 1 and 3 (--brokers)"},
		{coord: "raft", brokers: 3, voters: 0, set: true, wantErr: "--voters 0: must be between 1 and 3 (--brokers)"},
		{coord: "zk", brokers: 3, voters: 7, set: true, want: 0},
		{coord: "etcd", brokers: 3, want: 0},
	} {
		opts := &devOptions{coord: c.coord, brokers: c.brokers, voters: c.voters, votersSet: c.set}
		got, err := devVoters(opts)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("%+v: got %d, %v, want error %q", c, got, err, c.wantErr)
			}
			// runDev refuses it before it starts anything.
			if err := runDev(context.Background(), opts, io.Discard); err == nil || err.Error() != c.wantErr {
				t.Errorf("%+v: runDev got %v, want error %q", c, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: got %d, %v, want %d", c, got, err, c.want)
		}
		if c.wantOut != "" {
			if line := quorumLine(c.brokers, got); line != c.wantOut {
				t.Errorf("%+v: got line %q, want %q", c, line, c.wantOut)
			}
		}
	}
}

// freeDevPorts returns a port p such that p..p+n-1 (Kafka) and
// p+100..p+100+n-1 (Raft) are free on 127.0.0.1 when probed, drawn below
// the kernel's ephemeral range when there is room.
func freeDevPorts(t *testing.T, n int) int {
	t.Helper()
	low, high := freeport.BelowEphemeral()
	if high-low < 1000 {
		low, high = 20000, 30000
	}
	for attempt := 0; attempt < 100; attempt++ {
		base := low + rand.IntN(high-low-200)
		free := true
		var held []net.Listener
		for i := range n {
			for _, p := range []int{base + i, base + 100 + i} {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					free = false
					break
				}
				held = append(held, l)
			}
		}
		for _, l := range held {
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d free Kafka and Raft ports in a row", n)
	return 0
}

// TestDevQuorumWithObserver runs `tripod dev --brokers 4 --voters 3`:
// dev says brokers 1..3 vote and 4 observes, `tripod quorum describe`
// agrees, `tripod quorum add-voter 4` makes broker 4 a voter and
// `tripod quorum remove-voter 4` an observer again.
//
// It needs the Raft backend's coord.Quorum and its observers.
func TestDevQuorumWithObserver(t *testing.T) {
	base := freeDevPorts(t, 4)
	dir := t.TempDir()
	dev := startDev(t, "--brokers", "4", "--voters", "3", "--coord", "raft",
		"--base-port", strconv.Itoa(base), "--session-timeout", "2s", "--data-dir", dir)
	t.Cleanup(func() {
		if t.Failed() { // why the observer stopped, if it did
			if log, err := os.ReadFile(filepath.Join(dir, "broker-4", "tripod.log")); err == nil {
				t.Logf("broker 4's log ends:\n%s", log[max(0, len(log)-2048):])
			}
		}
	})
	var quorumSaid string
	dev.waitReady(t, func(line string) {
		if strings.HasPrefix(line, "raft quorum: ") {
			quorumSaid = line
		}
	})
	if want := "raft quorum: brokers 1,2,3 vote; broker 4 observes (tripod quorum add-voter promotes one)"; quorumSaid != want {
		t.Fatalf("dev said %q, want %q", quorumSaid, want)
	}
	addr := "127.0.0.1:" + strconv.Itoa(base)
	voters := regexp.MustCompile(`(?m)^CurrentVoters: +\[(.*)\]$`)
	observers := regexp.MustCompile(`(?m)^CurrentObservers: +\[(.*)\]$`)
	ids := func(members string) string {
		var out []string
		for _, m := range regexp.MustCompile(`"id": (\d+)`).FindAllStringSubmatch(members, -1) {
			out = append(out, m[1])
		}
		return strings.Join(out, ",")
	}
	status := func() (string, string) {
		out := runTripod(t, "quorum", "describe", "--status", "--bootstrap", addr)
		v, o := voters.FindStringSubmatch(out), observers.FindStringSubmatch(out)
		if v == nil || o == nil {
			t.Fatalf("describe --status printed:\n%s\nwant CurrentVoters and CurrentObservers lines", out)
		}
		return ids(v[1]), ids(o[1])
	}
	if v, o := status(); v != "1,2,3" || o != "4" {
		t.Fatalf("got voters %s, observers %s, want 1,2,3 and 4", v, o)
	}
	if out := runTripod(t, "quorum", "add-voter", "4", "--bootstrap", addr); out != "Added broker 4 to the voters of the Raft quorum.\n" {
		t.Fatalf("add-voter 4 printed %q", out)
	}
	if v, o := status(); v != "1,2,3,4" || o != "" {
		t.Fatalf("after add-voter 4: got voters %s, observers %s, want 1,2,3,4 and none", v, o)
	}
	if out := runTripod(t, "quorum", "remove-voter", "4", "--bootstrap", addr); !strings.HasPrefix(out, "Removed broker 4 from the voters") {
		t.Fatalf("remove-voter 4 printed %q", out)
	}
	// The leader lists an observer once it has heard from it again.
	err := cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		if v, o := status(); v != "1,2,3" || o != "4" {
			return fmt.Errorf("got voters %s, observers %s, want 1,2,3 and 4", v, o)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after remove-voter 4: %v", err)
	}
	dev.interrupt(t)
}
