package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestConsoleSeesWhatACLsAllow runs `tripod console` as alice against a
// broker with SASL and an authorizer: her console lists the topic she
// may describe and not the one she may not, and refuses, with Kafka's
// reason, a record she may not write; admin's console, the super user's,
// lists both.
func TestConsoleSeesWhatACLsAllow(t *testing.T) {
	addr := securedServe(t)
	admin := login(addr, "admin")
	runTripod(t, append([]string{"topics", "create", "orders", "--partitions", "1"}, admin...)...)
	runTripod(t, append([]string{"topics", "create", "ledger", "--partitions", "1"}, admin...)...)
	runTripod(t, append([]string{"acls", "add", "--allow-principal", "User:alice",
		"--operation", "Read", "--operation", "Describe", "--topic", "orders"}, admin...)...)

	consoleOf := func(user string) string {
		url, _, _ := startWatching(t, regexp.MustCompile(`serving (http://\S+)`),
			append([]string{"console", "--listen", "127.0.0.1:0"}, login(addr, user)...)...)
		return url
	}
	// topicsOf waits until url's topics list is want (names, sorted).
	topicsOf := func(url string, want ...string) {
		t.Helper()
		var last string
		err := cluster.WaitFor(t.Context(), 30*time.Second, func() error {
			status, body := getConsole(t, url+"api/topics", "", "")
			var page struct{ Topics []struct{ Name string } }
			if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
				last = string(body)
				return io.ErrUnexpectedEOF
			}
			var names []string
			for _, tp := range page.Topics {
				names = append(names, tp.Name)
			}
			last = strings.Join(names, ",")
			if last != strings.Join(want, ",") {
				return io.ErrUnexpectedEOF
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%sapi/topics lists %q, want %q", url, last, strings.Join(want, ","))
		}
	}

	alice := consoleOf("alice")
	topicsOf(alice, "orders")
	body, _ := json.Marshal(map[string]any{"topic": "orders", "value": "from the console"})
	resp, err := http.Post(alice+"api/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(answer), "AUTHORIZATION_FAILED") {
		t.Errorf("alice's console produced to orders without Write: got %d %s, want a refusal naming Kafka's AUTHORIZATION_FAILED", resp.StatusCode, answer)
	}

	topicsOf(consoleOf("admin"), "ledger", "orders")
}
