// Command faketoxiproxy answers the part of toxiproxy's HTTP API that
// sarama's functional test harness needs to run its tests against a
// cluster that is already up (TOXIPROXY_ADDR set), without toxiproxy: the
// proxies kafka1..kafkaN exist, listening on 127.0.0.1:29091.. and
// "forwarding" to the same address, so that the brokers of
// `tripod dev --brokers N --base-port 29091` are reached directly; a reset
// succeeds. Everything else (adding toxics, disabling a proxy) answers 501,
// so that the tests that cut connections fail plainly instead of passing
// without their fault. See docs/clients.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8474", "address of the API")
	proxies := flag.Int("proxies", 5, "number of proxies kafka1..kafkaN")
	basePort := flag.Int("base-port", 29091, "port of kafka1; kafkaN's is base-port+N-1")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /proxies/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		n, err := strconv.Atoi(strings.TrimPrefix(name, "kafka"))
		if !strings.HasPrefix(name, "kafka") || err != nil || n < 1 || n > *proxies {
			http.Error(w, "proxy not found", http.StatusNotFound)
			return
		}
		addr := fmt.Sprintf("127.0.0.1:%d", *basePort+n-1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "listen": addr, "upstream": addr, "enabled": true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("not supported: %s %s", r.Method, r.URL.Path)
		http.Error(w, "faketoxiproxy: toxics and proxy changes are not supported", http.StatusNotImplemented)
	})
	log.Printf("faketoxiproxy on %s: kafka1..kafka%d at 127.0.0.1:%d..", *listen, *proxies, *basePort)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
