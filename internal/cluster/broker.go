package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker is one `tripod serve` process of a Cluster. It keeps its flags,
// ports and data directory across restarts. Its methods are safe for
// concurrent use.
type Broker struct {
	// ID is the broker's broker.id.
	ID int32
	// Addr is the Kafka listener, host:port.
	Addr string
	// ClientAddr is the CLIENT listener, host:port, that a proxy outside
	// the cluster forwards clients to; empty unless the cluster was
	// started with Config.ClientProxyBasePort.
	ClientAddr string
	// RaftAddr is the Raft transport address (raft backend only).
	RaftAddr string
	// Rack is the broker's broker.rack (Config.Racks); empty for none.
	Rack string
	// MetricsAddr is the broker's --metrics-listen, host:port; empty
	// unless the cluster was started with Config.Metrics.
	MetricsAddr string
	// DataDir is the broker's --data-dir.
	DataDir string
	// Proxy is the proxy in front of Addr that the broker advertises, nil
	// unless the cluster was started with Config.Proxies.
	Proxy *Proxy
	// CoordProxy is the proxy through which the broker reaches ZooKeeper
	// or etcd, nil unless the cluster was started with
	// Config.CoordProxies.
	CoordProxy *Proxy
	// LogPath is the file the process's stdout and stderr go to, appended
	// to by every incarnation.
	LogPath string

	binary string
	args   []string
	// env is the process's environment; nil: the cluster's own.
	env []string
	// clientOpts are the options of the cluster's own clients of this
	// broker (TLS).
	clientOpts []kgo.Opt

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	waitErr error
	logFile *os.File
	paused  bool
	starts  int
}

// Advertised returns the address the broker advertises to clients and
// other brokers: its proxy's, or Addr.
func (b *Broker) Advertised() string {
	if b.Proxy != nil {
		return b.Proxy.Addr
	}
	return b.Addr
}

// Args returns the command line the broker runs with, without the binary.
func (b *Broker) Args() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.args...)
}

// SetArgs replaces the command line (without the binary) that the broker
// runs with from its next Start on: a test gives one broker flags of its
// own with it, e.g. a second log dir. The running incarnation, if any, is
// not affected.
func (b *Broker) SetArgs(args []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.args = append([]string(nil), args...)
}

// Start starts the broker process with its flags, unless it runs. It does
// not wait for the broker to serve; see Cluster.WaitServing.
func (b *Broker) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(b.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of broker %d: %w", b.ID, err)
	}
	b.starts++
	fmt.Fprintf(logFile, "=== tripod cluster: start %d of broker %d at %s: %s %v\n",
		b.starts, b.ID, time.Now().Format(time.RFC3339Nano), b.binary, b.args)
	cmd := exec.Command(b.binary, b.args...)
	cmd.Env = b.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start broker %d: %w", b.ID, err)
	}
	exited := make(chan struct{})
	b.cmd, b.exited, b.logFile, b.paused, b.waitErr = cmd, exited, logFile, false, nil
	// The wait goroutine is owned by the Broker: it ends when the process
	// exits, and every stop path waits for exited.
	go func() {
		err := cmd.Wait()
		b.mu.Lock()
		b.waitErr = err
		logFile.Close()
		b.mu.Unlock()
		close(exited)
	}()
	return nil
}

// PID returns the process id of the running incarnation, or 0.
func (b *Broker) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Running reports whether the broker process runs (paused counts as
// running).
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return false
	}
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Exit reports whether the current incarnation has exited on its own
// (not through Kill or Stop, which forget it) and with which error.
func (b *Broker) Exit() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return false, nil
	}
	select {
	case <-b.exited:
		return true, b.waitErr
	default:
		return false, nil
	}
}

// Paused reports whether the broker is paused (SIGSTOP, no SIGCONT yet).
func (b *Broker) Paused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused
}

// Exited returns a channel closed when the current incarnation exits, or
// nil when none was started.
func (b *Broker) Exited() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exited
}

// signal sends sig to the broker's process group.
func (b *Broker) signal(sig syscall.Signal) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return fmt.Errorf("signal %v to broker %d: not running", sig, b.ID)
	}
	if err := syscall.Kill(-b.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to broker %d (pid %d): %w", sig, b.ID, b.cmd.Process.Pid, err)
	}
	return nil
}

// reap waits up to timeout for the current incarnation to exit and forgets
// it, returning its exit error.
func (b *Broker) reap(timeout time.Duration) error {
	b.mu.Lock()
	exited := b.exited
	b.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		return fmt.Errorf("broker %d: did not exit within %v", b.ID, timeout)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.waitErr
	b.cmd, b.exited, b.paused = nil, nil, false
	return err
}

// Kill crashes the broker with SIGKILL and waits for it to exit. Killing a
// stopped broker is a no-op.
func (b *Broker) Kill() error {
	if !b.started() {
		return nil
	}
	if err := b.signal(syscall.SIGKILL); err != nil {
		return err
	}
	err := b.reap(30 * time.Second)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return nil // Killed, as asked.
	}
	return err
}

// Stop asks the broker to shut down with SIGTERM (a controlled shutdown:
// its leaderships move off first) and waits up to timeout for it to exit.
// It returns an error when the broker exits with a non-zero status or does
// not exit in time (it is then killed).
func (b *Broker) Stop(timeout time.Duration) error {
	if !b.started() {
		return nil
	}
	b.mu.Lock()
	paused := b.paused
	b.mu.Unlock()
	if err := b.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if paused {
		if err := b.signal(syscall.SIGCONT); err != nil {
			return err
		}
	}
	err := b.reap(timeout)
	if err != nil && b.Running() {
		b.Kill()
		return fmt.Errorf("stop broker %d: %w; killed it", b.ID, err)
	}
	if err != nil {
		return fmt.Errorf("stop broker %d: exited with %w", b.ID, err)
	}
	return nil
}

// Pause freezes the broker with SIGSTOP: it keeps its sockets but answers
// nothing and renews no session, as a long GC pause or a stalled VM would.
// It returns once every thread of the process is stopped: the kernel
// delivers SIGSTOP to each thread as it next runs, so a thread busy on
// another core can still answer or send a request after kill returns,
// and a test that writes right after Pause would see the paused broker
// replicate it.
func (b *Broker) Pause() error {
	if err := b.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	b.mu.Lock()
	b.paused = true
	pid := 0
	if b.cmd != nil {
		pid = b.cmd.Process.Pid
	}
	b.mu.Unlock()
	if pid == 0 {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for !processStopped(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pause broker %d (pid %d): its threads were not all stopped within 10s of SIGSTOP", b.ID, pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// processStopped reports whether every thread of process pid is stopped
// (state T or t in /proc/PID/task/TID/stat), or the process is gone.
func processStopped(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true // gone
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		// The state follows the command name, which is in parentheses
		// and may hold spaces.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) {
			return false
		}
		if st := stat[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume continues a paused broker with SIGCONT.
func (b *Broker) Resume() error {
	if err := b.signal(syscall.SIGCONT); err != nil {
		return err
	}
	b.mu.Lock()
	b.paused = false
	b.mu.Unlock()
	return nil
}

// Restart starts the broker again with the same flags and data directory;
// a running broker is killed first.
func (b *Broker) Restart() error {
	if err := b.Kill(); err != nil {
		return err
	}
	return b.Start()
}

func (b *Broker) started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// LogTail returns up to the last n bytes of the broker's log.
func (b *Broker) LogTail(n int64) string {
	f, err := os.Open(b.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// String names the broker for test messages.
func (b *Broker) String() string { return "broker " + strconv.Itoa(int(b.ID)) + " (" + b.Addr + ")" }
