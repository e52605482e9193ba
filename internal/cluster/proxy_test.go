package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer echoes lines until closed; Close waits for its goroutines.
type echoServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); e.wg.Wait() })
	return e
}

// roundTrip sends a line through conn and reads it back.
func roundTrip(conn net.Conn, line string) error {
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		return err
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echo: got " + got)
	}
	return nil
}

// TestProxyCutAndHeal: a proxy forwards both ways; Cut closes the
// connections through it and refuses new ones; Heal lets new ones through.
func TestProxyCutAndHeal(t *testing.T) {
	echo := startEcho(t)
	p, err := NewProxy(echo.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := roundTrip(conn, "before the cut"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Cut()
	if err := roundTrip(conn, "after the cut"); err == nil {
		t.Fatal("an open connection still works after Cut, want it closed")
	}
	err = WaitFor(context.Background(), 5*time.Second, func() error {
		conn, err := net.Dial("tcp", p.Addr)
		if err != nil {
			return nil // Refused outright: cut.
		}
		defer conn.Close()
		if roundTrip(conn, "new while cut") == nil {
			return errors.New("a new connection works while cut")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	p.Heal()
	conn2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if err := roundTrip(conn2, "healed"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := roundTrip(conn2, "closed"); err == nil {
		t.Fatal("a connection works after Close")
	}
}
