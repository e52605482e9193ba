// Package zkserver runs a real Apache ZooKeeper for tests, from Debian's
// `zookeeper` package: a standalone server or an ensemble of n servers on
// free loopback ports, each a java child process with its own zoo.cfg, data
// directory and log file under the directory it is given. It owns those
// processes and the goroutines that wait for them; Close kills them all.
//
// It must not be imported by anything but tests and test harnesses.
package zkserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/freeport"
)

// DefaultJar is where Debian's zookeeper package installs the server.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// Config describes how to run the servers. DefaultConfig gives working
// values; Validate checks them.
type Config struct {
	// Java is the java binary. Default: "java" found in PATH.
	Java string
	// Jar is the ZooKeeper server jar; its manifest names the jars it
	// needs. Default DefaultJar.
	Jar string
	// ExtraClassPath is appended to the class path (an slf4j binding, so
	// the log file says something). Default: /usr/share/java/slf4j-simple.jar
	// when present.
	ExtraClassPath []string
	// TickTime is ZooKeeper's tickTime, its unit of time for heartbeats and
	// session expiry checks. Default 200ms; 10ms..2s.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// the server grants. Defaults 1s and 60s; MinSessionTimeout must be at
	// least 2 ticks and not above MaxSessionTimeout.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// ForceSync makes the server fsync its transaction log on every write.
	// Default false: tests do not survive power loss, and a shared disk's
	// fsyncs would dominate their run time.
	ForceSync bool
	// StartTimeout bounds how long Start waits for the servers to serve.
	// Default 60s; at least 1s.
	StartTimeout time.Duration
	// HeapMB is the JVM's maximum heap in MiB. Default 256; at least 32.
	HeapMB int
	// FullJIT lets the JVM compile hot code fully (C2), as a production
	// ZooKeeper runs. Default false: the JVM stops at C1, which starts
	// faster, what short tests want; benchmarks at scale set it.
	FullJIT bool
	// FixedHeap starts the JVM with its whole heap (-Xms equal to -Xmx),
	// as production ZooKeeper deployments set it. Default false: the heap
	// starts at 16 MiB and grows, which keeps short tests small; under its
	// first heavy load such a heap grows through collection after
	// collection (a 10 000-partition failover met sixteen in two seconds,
	// one of them full), in the middle of what a benchmark measures.
	FixedHeap bool
}

// DefaultConfig returns a Config for Debian's package on this machine.
func DefaultConfig() Config {
	cfg := Config{
		Java:              "java",
		Jar:               DefaultJar,
		TickTime:          200 * time.Millisecond,
		MinSessionTimeout: time.Second,
		MaxSessionTimeout: 60 * time.Second,
		StartTimeout:      60 * time.Second,
		HeapMB:            256,
	}
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cfg.ExtraClassPath = []string{"/usr/share/java/slf4j-simple.jar"}
	}
	return cfg
}

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	if c.Java == "" {
		return errors.New("zkserver java: required")
	}
	if c.Jar == "" {
		return errors.New("zkserver jar: required")
	}
	if c.TickTime < 10*time.Millisecond || c.TickTime > 2*time.Second {
		return fmt.Errorf("zkserver tick time %v: must be between 10ms and 2s", c.TickTime)
	}
	if c.MinSessionTimeout < 2*c.TickTime || c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("zkserver session timeouts %v..%v: min must be >= 2 ticks (%v) and <= max",
			c.MinSessionTimeout, c.MaxSessionTimeout, 2*c.TickTime)
	}
	if c.StartTimeout < time.Second {
		return fmt.Errorf("zkserver start timeout %v: must be >= 1s", c.StartTimeout)
	}
	if c.HeapMB < 32 {
		return fmt.Errorf("zkserver heap %d MiB: must be >= 32", c.HeapMB)
	}
	return nil
}

// Server is a running standalone ZooKeeper or ensemble. Its methods are safe
// for concurrent use.
type Server struct {
	cfg   Config
	dir   string
	java  string
	nodes []*node

	mu     sync.Mutex
	closed bool
}

// node is one server of the ensemble (the only one when standalone).
type node struct {
	id           int
	dir          string
	clientPort   int
	peerPort     int
	electionPort int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	logFile *os.File
}

// Available reports why ZooKeeper cannot be run here, or nil if it can.
func Available() error {
	cfg := DefaultConfig()
	if _, err := exec.LookPath(cfg.Java); err != nil {
		return fmt.Errorf("zkserver: java not found in PATH: %w", err)
	}
	if _, err := os.Stat(cfg.Jar); err != nil {
		return fmt.Errorf("zkserver: %s missing: %w", cfg.Jar, err)
	}
	return nil
}

// Require skips t when ZooKeeper cannot be run here, or fails it when the
// environment variable CI is "true": CI must never skip for a missing server.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: install the Debian package `zookeeper` (apt-get install zookeeper)", err)
		}
		t.Skipf("%v: install the Debian package `zookeeper` to run this test", err)
	}
}

// StartForTest runs an ensemble of n servers (standalone when n is 1) in a
// test's temporary directory with DefaultConfig, after Require, and closes
// it when the test ends.
func StartForTest(t testing.TB, n int) *Server {
	t.Helper()
	Require(t)
	s, err := StartEnsemble(t.TempDir(), n, DefaultConfig())
	if err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Start runs a standalone server with its data, config and log in dir and
// returns once it serves clients.
func Start(dir string, cfg Config) (*Server, error) {
	return StartEnsemble(dir, 1, cfg)
}

// StartEnsemble runs n servers (a standalone server when n is 1) with their
// data, configs and logs under dir, and returns once every one of them
// serves clients.
func StartEnsemble(dir string, n int, cfg Config) (*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("zkserver ensemble size %d: must be >= 1", n)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	java, err := exec.LookPath(cfg.Java)
	if err != nil {
		return nil, fmt.Errorf("zkserver java %q: %w", cfg.Java, err)
	}
	if _, err := os.Stat(cfg.Jar); err != nil {
		return nil, fmt.Errorf("zkserver jar %s: %w", cfg.Jar, err)
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, dir: dir, java: java}
	for i := 0; i < n; i++ {
		nd := &node{
			id:           i + 1,
			dir:          filepath.Join(dir, fmt.Sprintf("zk%d", i+1)),
			clientPort:   ports[3*i],
			peerPort:     ports[3*i+1],
			electionPort: ports[3*i+2],
		}
		s.nodes = append(s.nodes, nd)
	}
	for _, nd := range s.nodes {
		if err := s.writeConfig(nd); err != nil {
			return nil, err
		}
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Addr returns the first server's client address, host:port.
func (s *Server) Addr() string { return s.nodes[0].addr() }

// Addrs returns every server's client address.
func (s *Server) Addrs() []string {
	addrs := make([]string, len(s.nodes))
	for i, nd := range s.nodes {
		addrs[i] = nd.addr()
	}
	return addrs
}

// Connect returns the connect string of the whole ensemble,
// "host:port,host:port", as zookeeper.connect takes it.
func (s *Server) Connect() string { return strings.Join(s.Addrs(), ",") }

// Size returns the number of servers.
func (s *Server) Size() int { return len(s.nodes) }

// Start starts every server that is not running, on the same ports and
// data as before, and waits until all of them serve clients.
func (s *Server) Start() error {
	for i := range s.nodes {
		if err := s.startNode(i); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(s.cfg.StartTimeout)
	for _, nd := range s.nodes {
		if err := nd.waitServing(deadline); err != nil {
			return err
		}
	}
	return nil
}

// StartNode starts server i (0-based) again and waits until it serves
// clients, which in an ensemble needs a quorum of running servers.
func (s *Server) StartNode(i int) error {
	if err := s.startNode(i); err != nil {
		return err
	}
	return s.nodes[i].waitServing(time.Now().Add(s.cfg.StartTimeout))
}

// Stop stops every server with SIGTERM and waits for them to exit
// (SIGKILL after 10 s). Data stays for Start.
func (s *Server) Stop() error {
	var first error
	for _, nd := range s.nodes {
		if err := nd.stop(syscall.SIGTERM, 10*time.Second); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// StopNode stops server i (0-based) with SIGTERM and waits for it to exit.
func (s *Server) StopNode(i int) error { return s.nodes[i].stop(syscall.SIGTERM, 10*time.Second) }

// Kill kills every server with SIGKILL, as a crash would, and waits for
// them to exit. Data stays for Start.
func (s *Server) Kill() error {
	var first error
	for _, nd := range s.nodes {
		if err := nd.stop(syscall.SIGKILL, 10*time.Second); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Restart stops every server and starts them again on the same ports and
// data.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Close kills every server and waits for them. Closing twice is a no-op.
// The data directory is left to its owner (t.TempDir removes it).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.Kill()
}

// LogTail returns the last n bytes of server i's log, for test failures.
func (s *Server) LogTail(i, n int) string {
	b, err := os.ReadFile(filepath.Join(s.nodes[i].dir, "zookeeper.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (s *Server) writeConfig(nd *node) error {
	dataDir := filepath.Join(nd.dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("zkserver data dir %s: %w", dataDir, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", s.cfg.TickTime.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
	fmt.Fprintf(&b, "clientPort=%d\n", nd.clientPort)
	b.WriteString("clientPortAddress=127.0.0.1\n")
	fmt.Fprintf(&b, "minSessionTimeout=%d\n", s.cfg.MinSessionTimeout.Milliseconds())
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", s.cfg.MaxSessionTimeout.Milliseconds())
	b.WriteString("admin.enableServer=false\n")
	b.WriteString("4lw.commands.whitelist=*\n")
	b.WriteString("maxClientCnxns=0\n")
	if !s.cfg.ForceSync {
		b.WriteString("forceSync=no\n")
	}
	if len(s.nodes) > 1 {
		b.WriteString("initLimit=25\nsyncLimit=10\n")
		for _, peer := range s.nodes {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", peer.id, peer.peerPort, peer.electionPort)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(nd.id)+"\n"), 0o644); err != nil {
			return fmt.Errorf("zkserver myid of server %d: %w", nd.id, err)
		}
	}
	cfgPath := filepath.Join(nd.dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("zkserver config %s: %w", cfgPath, err)
	}
	return nil
}

func (s *Server) startNode(i int) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("zkserver: closed")
	}
	nd := s.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		select {
		case <-nd.exited:
		default:
			return nil // running
		}
	}
	logPath := filepath.Join(nd.dir, "zookeeper.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("zkserver log %s: %w", logPath, err)
	}
	classPath := strings.Join(append([]string{s.cfg.Jar}, s.cfg.ExtraClassPath...), ":")
	initial := 16
	if s.cfg.FixedHeap {
		initial = s.cfg.HeapMB
	}
	args := []string{fmt.Sprintf("-Xmx%dm", s.cfg.HeapMB), fmt.Sprintf("-Xms%dm", initial), "-XX:+UseSerialGC"}
	if !s.cfg.FullJIT {
		args = append(args, "-XX:TieredStopAtLevel=1")
	}
	cmd := exec.Command(s.java, append(args,
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", classPath,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain",
		filepath.Join(nd.dir, "zoo.cfg"))...)
	cmd.Dir = nd.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("zkserver start server %d: %w", nd.id, err)
	}
	exited := make(chan struct{})
	nd.cmd, nd.exited, nd.logFile = cmd, exited, logFile
	go func() {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	return nil
}

func (nd *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.clientPort)) }

// running returns the node's exit channel, or nil when it never started.
func (nd *node) running() (*exec.Cmd, chan struct{}) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.cmd, nd.exited
}

// stop signals the node's process group and waits for the process to exit,
// escalating to SIGKILL after grace.
func (nd *node) stop(sig syscall.Signal, grace time.Duration) error {
	cmd, exited := nd.running()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	syscall.Kill(-cmd.Process.Pid, sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-timer.C:
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
		return fmt.Errorf("zkserver server %d (pid %d): did not exit after SIGKILL", nd.id, cmd.Process.Pid)
	}
}

// waitServing polls the "srvr" four-letter word until the server says it
// serves (Mode: standalone, leader or follower), the process exits, or the
// deadline passes.
func (nd *node) waitServing(deadline time.Time) error {
	_, exited := nd.running()
	var last string
	for {
		out, err := fourLetter(nd.addr(), "srvr")
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = strings.TrimSpace(out)
		}
		select {
		case <-exited:
			return fmt.Errorf("zkserver server %d exited before serving (see %s)", nd.id,
				filepath.Join(nd.dir, "zookeeper.log"))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zkserver server %d at %s: not serving by the deadline: %s", nd.id, nd.addr(), last)
		}
		// Polling interval of a readiness probe, not synchronisation.
		time.Sleep(50 * time.Millisecond)
	}
}

// FourLetter sends a four-letter word ("ruok", "srvr", "mntr", ...) to the
// server at addr and returns its answer.
func FourLetter(addr, cmd string) (string, error) { return fourLetter(addr, cmd) }

func fourLetter(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, bufio.NewReader(conn)); err != nil {
		return buf.String(), err
	}
	return buf.String(), nil
}

// freePorts returns n distinct free loopback ports (freeport.Addrs).
func freePorts(n int) ([]int, error) {
	addrs, err := freeport.Addrs(n)
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	ports := make([]int, 0, n)
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("zkserver free port %q: %w", a, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("zkserver free port %q: %w", a, err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}
