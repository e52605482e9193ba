package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// routesData registers the API of the data pages: messages and consumer
// groups.
func (s *Server) routesData() {
	d := &dataAPI{Server: s, lag: newLagHistory()}
	s.mux.HandleFunc("GET /api/messages/topics", d.handleMessageTopics)
	s.mux.HandleFunc("GET /api/messages", d.handleMessages)
	s.mux.HandleFunc("POST /api/messages", d.handleProduce)
	s.mux.HandleFunc("GET /api/groups", d.handleGroups)
	s.mux.HandleFunc("GET /api/groups/{group}", d.handleGroup)
	s.mux.HandleFunc("POST /api/groups/{group}/reset-offsets", d.handleResetOffsets)
	s.goOwned(d.sampleLag)
}

// dataAPI serves the data pages' API for a Server; lag is the consumer
// groups' lag over time that their pages chart.
type dataAPI struct {
	*Server
	lag *lagHistory
}

// badRequest returns an error that is the request's fault, so that it
// is answered 400 with its text.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

// writeFailure answers err: 400 when it is the request's fault, status
// otherwise. The 400 text leaves out the "bad request: " prefix, which
// the status already says.
func writeFailure(w http.ResponseWriter, status int, err error) {
	if errors.Is(err, errBadRequest) {
		writeError(w, http.StatusBadRequest, errors.New(strings.TrimPrefix(err.Error(), errBadRequest.Error()+": ")))
		return
	}
	writeError(w, status, err)
}

// intParam returns the query parameter name as an integer in [lo, hi],
// def when it is absent or empty.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("parameter %s=%q: want an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// timeParam parses the query parameter name as an RFC 3339 time; ok is
// false when it is absent.
func timeParam(r *http.Request, name string) (t time.Time, ok bool, err error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, badRequest("parameter %s=%q: want an RFC 3339 time such as 2024-05-01T12:00:00Z", name, v)
	}
	return t, true, nil
}
