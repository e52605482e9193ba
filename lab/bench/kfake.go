package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tripodmq/tripod/lab"
)

// Kfake is the --coord of the benchmarks' comparison target: franz-go's
// kfake, an in-memory Kafka-protocol fake with no replication and no
// disk, run in a process of its own as the brokers are. A run against
// both prices what tripod does beyond it: replicas, segment files, a
// controller.
const Kfake = "kfake"

// RunKfake runs a kfake cluster of brokers brokers on loopback until ctx
// ends, after writing their addresses, comma separated, on one line to
// out: `tripod bench kfake`.
func RunKfake(ctx context.Context, brokers int, out io.Writer) error {
	if brokers < 1 || brokers > 100 {
		return fmt.Errorf("--brokers %d: must be between 1 and 100", brokers)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(out, strings.Join(c.ListenAddrs(), ",")); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// startKfake runs `tripod bench kfake` of the tripod executable (opts.Binary,
// empty: this one) with opts.Brokers brokers and GOMAXPROCS as the
// brokers would have, and returns it as a benchmark's target: its
// addresses, its process and the function that stops it. The process dies
// with this one.
func startKfake(opts *ProduceConfig, out io.Writer) (benchTarget, error) {
	self, err := lab.Binary(opts.Binary)
	if err != nil {
		return benchTarget{}, fmt.Errorf("find this binary to run kfake: %w", err)
	}
	cmd := exec.Command(self, "bench", "kfake", "--brokers", strconv.Itoa(opts.Brokers))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(opts.startedBrokerProcs()))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return benchTarget{}, err
	}
	if err := cmd.Start(); err != nil {
		return benchTarget{}, fmt.Errorf("start %s bench kfake: %w", self, err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok || l == "" {
			stop()
			return benchTarget{}, errors.New("bench kfake ended without naming its brokers")
		}
		seeds := strings.Split(l, ",")
		fmt.Fprintf(out, "started kfake with %d brokers, GOMAXPROCS %d: %s\n", opts.Brokers, opts.startedBrokerProcs(), strings.Join(seeds, ","))
		return benchTarget{seeds: seeds, pids: []int{cmd.Process.Pid}, stop: stop}, nil
	case <-time.After(30 * time.Second):
		stop()
		return benchTarget{}, errors.New("bench kfake named no brokers within 30s")
	}
}
