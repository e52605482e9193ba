// Package console serves tripod's web console: a browser's view of a
// Kafka-protocol cluster (brokers, controller and coordination backend,
// topics and partitions with each replica's log end offset and the high
// watermark, a live timeline of elections and ISR changes, messages and
// consumer groups), from assets embedded in the binary.
//
// The console is a Kafka client: everything it shows it asks the cluster
// over the Kafka protocol, with the TLS and SASL settings the CLI uses, so
// it shows what the cluster's ACLs let its principal see. The one
// exception is the controller epoch and the coordination service's
// health, which no Kafka response carries: given Options.Coordination
// (the broker's own backend in tripod serve --console-listen, or the
// ZooKeeper or etcd of tripod console --coord), the console reads them
// there. Pages follow
// changes over server-sent events (GET /api/stream), never by reloading.
package console

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/coord"
)

// Options configure a console Server.
type Options struct {
	// Client are the franz-go options of the console's client: the seed
	// brokers, and TLS and SASL as the CLI sets them.
	Client []kgo.Opt
	// Refresh is how often the console reads the cluster's state for its
	// live pages; 0 means DefaultRefresh.
	Refresh time.Duration
	// Logger logs what the console does; nil discards.
	Logger *slog.Logger
	// Coordination, when set, is the cluster's coordination service,
	// which the console asks at every poll for the controller and its
	// epoch: no Kafka response carries the epoch, nor whether the
	// service answers. Every coord.Backend is one. The console only
	// reads it and never closes it: a broker's own backend stays the
	// broker's.
	Coordination Coordination
}

// Coordination is what the console reads of a coordination service:
// the controller it names, with the controller epoch.
type Coordination interface {
	Controller(ctx context.Context) (coord.ControllerInfo, error)
}

// DefaultRefresh is how often, by default, the console reads the state of
// the cluster its live pages follow.
const DefaultRefresh = 250 * time.Millisecond

// Server is a console: an http.Handler and the goroutines that follow the
// cluster for it. Close stops them.
type Server struct {
	opts Options
	log  *slog.Logger
	cl   *kgo.Client
	adm  *kadm.Client
	mux  *http.ServeMux
	// poll follows the cluster for the live pages (poller.go).
	poll *poller

	// ctx ends when Close is called; every goroutine of the server ends
	// with it, and wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a console of the cluster opts.Client reaches. It connects
// lazily: a cluster that is down shows as such in the pages.
func New(opts Options) (*Server, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl, err := kgo.NewClient(opts.Client...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, log: log, cl: cl, adm: kadm.NewClient(cl),
		mux: http.NewServeMux(), ctx: ctx, cancel: cancel}
	s.routes()
	return s, nil
}

// routes registers the assets and every API handler.
func (s *Server) routes() {
	static, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	s.routesLive()
	s.routesData()
	files := http.FileServerFS(static)
	s.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		// The page's routes are the fragment's (#/topics/...): every
		// other path is an asset.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the console's pages and API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// Close stops the server's goroutines, waits for them and closes its
// client. Requests in flight end with their streams.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
	s.cl.Close()
}

// goOwned runs fn on a goroutine the server owns: it gets the server's
// context, and Close waits for it.
func (s *Server) goOwned(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
}

// apiError is the body of every failed API request.
type apiError struct {
	Error string `json:"error"`
}

// writeJSON writes v as the JSON body of a status response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes err as a status response's {"error": ...} body.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, apiError{Error: err.Error()})
}

// errBadRequest marks an error that is the request's fault (400).
var errBadRequest = errors.New("bad request")
