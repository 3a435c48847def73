package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// execMaxEffectBody bounds a request to the effects endpoint: a key and a
// result, which is stored like a job's result.
const execMaxEffectBody = 2 << 20

// execEffectsDrain bounds the wait for ledger writes in flight when the
// attempt ends.
const execEffectsDrain = 5 * time.Second

// execEffectsServer is the side-effect ledger as an exec command sees it, at
// LEASEHOLD_EFFECTS_URL. It exists for one attempt: it listens on
// 127.0.0.1 only, under a random path that only the command's environment
// knows, and closes when the attempt's Run returns.
//
// The protocol, which exec scripts code against (JSON bodies, POST only):
//
//	POST $LEASEHOLD_EFFECTS_URL/start   {"key":"post-article"}
//	  200 {"done":false,"idempotency_key":"42:post-article"}
//	      perform the effect now, sending idempotency_key with it (an
//	      Idempotency-Key header, say), then call finish
//	  200 {"done":true,"result":{…},"idempotency_key":"42:post-article"}
//	      an earlier attempt did it: do not do it again; result is what it
//	      recorded
//	POST $LEASEHOLD_EFFECTS_URL/finish  {"key":"post-article","result":{…}}
//	  200 {}    recorded as done (result defaults to {})
//
// Errors are {"error":"…"} (and "field" for 400): 400 for a body that is
// not JSON or a key that is missing or not [A-Za-z0-9_.:-]{1,128}; 409
// {"error":"lease lost"} when this attempt no longer holds the job — stop
// and exit, the work is someone else's now; 413 for a body over 2 MiB; 502
// when the ledger could not be reached (retrying may help). Finishing a key
// this attempt did not start is refused like a lost lease (409). Other
// paths are 404, other methods 405. Requests keep
// working during the grace period after SIGTERM, so a script can still
// record an effect it has just performed.
type execEffectsServer struct {
	// URL is the endpoint, without a trailing slash.
	URL    string
	srv    *http.Server
	served chan struct{}
	cancel context.CancelFunc
}

// startExecEffects serves r's ledger until Close.
func startExecEffects(ctx context.Context, r worker.Reporter, log *slog.Logger) (*execEffectsServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for effects: %w", err)
	}
	// Any local process can reach 127.0.0.1; only the command knows the
	// path.
	secret := make([]byte, 16)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	prefix := "/" + hex.EncodeToString(secret)

	// Not cancelled with the attempt: during the grace period the lease is
	// still held (cancel, shutdown) and a script that has just posted the
	// article must be able to say so. A lost lease is refused by the ledger
	// itself.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := execEffectsHandler{r: r, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/start", h.start)
	mux.HandleFunc("POST "+prefix+"/finish", h.finish)
	s := &execEffectsServer{
		URL: "http://" + ln.Addr().String() + prefix,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return base },
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		served: make(chan struct{}),
		cancel: cancel,
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("serving effects", "err", err)
		}
	}()
	return s, nil
}

// Close stops serving. A request in flight may finish its ledger write
// (the command may have been killed right after performing the effect)
// within execEffectsDrain; after that its write is cancelled.
func (s *execEffectsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), execEffectsDrain)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.cancel()
		_ = s.srv.Close()
	}
	s.cancel()
	<-s.served
}

type execEffectsHandler struct {
	r   worker.Reporter
	log *slog.Logger
}

func (h execEffectsHandler) start(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Key string `json:"key"`
	}
	if !decodeExecEffect(w, req, &body, &body.Key) {
		return
	}
	start, err := h.r.StartEffect(req.Context(), body.Key)
	if err != nil {
		h.fail(w, "starting effect", body.Key, err)
		return
	}
	h.log.Info("effect started", "key", body.Key, "done", start.Done)
	writeExecJSON(w, http.StatusOK, start.API())
}

func (h execEffectsHandler) finish(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Key    string          `json:"key"`
		Result json.RawMessage `json:"result"`
	}
	if !decodeExecEffect(w, req, &body, &body.Key) {
		return
	}
	if err := h.r.FinishEffect(req.Context(), body.Key, body.Result); err != nil {
		h.fail(w, "finishing effect", body.Key, err)
		return
	}
	h.log.Info("effect finished", "key", body.Key)
	writeExecJSON(w, http.StatusOK, struct{}{})
}

func (h execEffectsHandler) fail(w http.ResponseWriter, action, key string, err error) {
	var invalid *queue.ValidationError
	switch {
	case errors.Is(err, queue.ErrLeaseLost):
		writeExecJSON(w, http.StatusConflict, map[string]string{"error": "lease lost"})
	case errors.As(err, &invalid):
		writeExecJSON(w, http.StatusBadRequest, map[string]string{"error": invalid.Error(), "field": invalid.Field})
	default:
		h.log.Warn(action, "key", key, "err", err)
		writeExecJSON(w, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf("%s: %v", action, err)})
	}
}

// decodeExecEffect reads a request body into v and checks that it named a
// key; on failure it has answered the request.
func decodeExecEffect(w http.ResponseWriter, req *http.Request, v any, key *string) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, req.Body, execMaxEffectBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeExecJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body over 2 MiB"})
		return false
	case err != nil:
		writeExecJSON(w, http.StatusBadRequest, map[string]string{"error": "reading body: " + err.Error()})
		return false
	}
	if err := json.Unmarshal(data, v); err != nil {
		writeExecJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not valid JSON: " + err.Error()})
		return false
	}
	if *key == "" {
		writeExecJSON(w, http.StatusBadRequest, map[string]string{"error": "key is required", "field": "key"})
		return false
	}
	return true
}

func writeExecJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
