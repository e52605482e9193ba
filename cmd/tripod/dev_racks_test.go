package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// rackedBrokerLine matches dev's line of a broker with a rack.
var rackedBrokerLine = regexp.MustCompile(`^broker (\d+): \S+ rack (\S+) pid \d+ `)

// TestDevRacks runs `tripod dev --brokers 3 --racks az1,az2` as a process:
// its broker lines say brokers 1 and 3 are in az1 and 2 in az2 (round
// robin), and `tripod topics describe --brokers` lists each broker with
// that rack, as the brokers registered it, in Kafka's form.
func TestDevRacks(t *testing.T) {
	base := freeBasePort(t)
	dev := startDev(t, "--brokers", "3", "--racks", "az1, az2", "--coord", "raft",
		"--base-port", strconv.Itoa(base), "--session-timeout", "2s", "--data-dir", t.TempDir())
	racks := map[int]string{}
	dev.waitReady(t, func(line string) {
		if m := rackedBrokerLine.FindStringSubmatch(line); m != nil {
			id, _ := strconv.Atoi(m[1])
			racks[id] = m[2]
		}
	})
	if want := map[int]string{1: "az1", 2: "az2", 3: "az1"}; fmt.Sprint(racks) != fmt.Sprint(want) {
		t.Fatalf("dev's broker lines name racks %v, want %v", racks, want)
	}
	addr := "127.0.0.1:" + strconv.Itoa(base)
	want := strings.Join([]string{
		fmt.Sprintf("127.0.0.1:%d (id: 1 rack: az1)", base),
		fmt.Sprintf("127.0.0.1:%d (id: 2 rack: az2)", base+1),
		fmt.Sprintf("127.0.0.1:%d (id: 3 rack: az1)", base+2),
	}, "\n") + "\n"
	var out string
	err := cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		if out = runTripod(t, "topics", "describe", "--brokers", "--bootstrap", addr); out != want {
			return fmt.Errorf("topics describe --brokers printed:\n%s\nwant:\n%s", out, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dev.interrupt(t)
}

// TestDevRacksRefusesBadValues checks that --racks names itself when a
// rack is empty or has a control character.
func TestDevRacksRefusesBadValues(t *testing.T) {
	for _, v := range []string{"az1,,az2", "az1,", "az\x011"} {
		if _, err := devRacks(v); err == nil || !strings.Contains(err.Error(), "--racks") {
			t.Errorf("--racks %q: got %v, want an error naming --racks", v, err)
		}
	}
	if got, err := devRacks("az1, az2"); err != nil || fmt.Sprint(got) != "[az1 az2]" {
		t.Errorf("--racks \"az1, az2\": got %q, %v; want [az1 az2]", got, err)
	}
}
