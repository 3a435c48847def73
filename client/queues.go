package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/leasehold/leasehold/api"
)

// Queue is a queue's settings and how many of its jobs wait and run.
type Queue = api.Queue

// QueuePatch changes a queue's settings; absent fields stay as they are:
// api.Value(true) pauses, api.Null[int32]() removes the cap.
type QueuePatch = api.QueuePatch

// Queues lists every queue that has jobs or settings, by name.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var body api.Queues
	_, err := c.do(ctx, http.MethodGet, "/api/v1/queues", nil, nil, &body)
	return body.Queues, err
}

// PatchQueue pauses, resumes or caps a queue, creating its settings when
// it has none.
func (c *Client) PatchQueue(ctx context.Context, name string, p QueuePatch) (Queue, error) {
	var q Queue
	_, err := c.do(ctx, http.MethodPatch, "/api/v1/queues/"+url.PathEscape(name), nil, p, &q)
	return q, err
}
