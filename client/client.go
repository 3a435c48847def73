// Package client is a typed Go client of Leasehold's admin API: submit
// jobs one at a time or in batches, get and list them, retry and cancel
// them (one or in bulk), read the stats, and wait until a job reaches a
// state. Errors from the server are *Error, carrying the API's "error"
// and "field".
//
// The API is described in full by the server's GET /api/v1/openapi.json.
//
//	c := client.New("https://leasehold.example.com", os.Getenv("LEASEHOLD_API_TOKEN"))
//	job, err := c.Submit(ctx, client.NewJob{
//		Kind:    "app_investigation",
//		Payload: json.RawMessage(`{"app":"com.example.notes"}`),
//	})
//	if err != nil {
//		var apiErr *client.Error
//		if errors.As(err, &apiErr) && apiErr.Field != "" {
//			log.Fatalf("field %s: %s", apiErr.Field, apiErr.Message)
//		}
//		log.Fatal(err)
//	}
//	done, err := c.WaitFor(ctx, job.ID, client.StateSucceeded, client.StateDead, client.StateCancelled)
//	if err != nil {
//		log.Fatal(err)
//	}
//	fmt.Println(done.State, string(done.Result))
//
// Queues and schedules are not in the client because the server has no
// routes for them yet.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/leasehold/leasehold/api"
)

// Client calls one Leasehold server with one admin token. It is safe for
// concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests with hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// New returns a client of the server at baseURL ("https://host" or
// "http://127.0.0.1:8080", without /api/v1) that authenticates with the
// admin token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token}
	for _, o := range opts {
		o(c)
	}
	c.http = cmp.Or(c.http, http.DefaultClient)
	return c
}

// Error is an answer of the server that is not a success: its status and
// the API's {"error", "field", "code"} body.
type Error struct {
	Status int
	// Message is the API's "error".
	Message string
	// Field names the request field at fault ("kind", "jobs[3].priority"),
	// or is empty.
	Field string
	// Code is the API's stable word for the kind of answer
	// (api.CodeNotFound, api.CodeConflict, …): decide on it, not on
	// Message. Empty when the answer did not come from the API.
	Code api.Code
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	return fmt.Sprintf("leasehold: HTTP %d: %s", e.Status, msg)
}

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// do sends one request; a 2xx answer is decoded into out (when not nil),
// anything else becomes an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encoding request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, readError(res)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return res.StatusCode, fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return res.StatusCode, nil
}

func readError(res *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	e := &Error{Status: res.StatusCode}
	var body api.Error
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Message, e.Field, e.Code = body.Error, body.Field, body.Code
	} else {
		// Not the API's shape: a proxy in between, say.
		e.Message = strings.TrimSpace(cmp.Or(string(raw), http.StatusText(res.StatusCode)))
	}
	return e
}
