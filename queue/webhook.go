package queue

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The webhook event types.
const (
	WebhookJobSucceeded  = "job.succeeded"
	WebhookJobFailed     = "job.failed" // an attempt failed (or its lease expired) and the job will retry
	WebhookJobDead       = "job.dead"   // moved to the dead letters
	WebhookWorkerOffline = "worker.offline"
)

// WebhookEventTypes lists every event type.
var WebhookEventTypes = []string{WebhookJobSucceeded, WebhookJobFailed, WebhookJobDead, WebhookWorkerOffline}

// DefaultWebhookEvents is LEASEHOLD_WEBHOOK_EVENTS's default.
const DefaultWebhookEvents = WebhookJobDead

// minWebhookSecret is the shortest secret accepted: a short one can be
// guessed from one signed body.
const minWebhookSecret = 16

// WebhookConfig is where events go and which ones.
type WebhookConfig struct {
	URL    string
	Secret string
	Events []string
}

// Enabled reports whether webhooks are configured.
func (c WebhookConfig) Enabled() bool { return c.URL != "" }

// ParseWebhookConfig checks the three settings together: a URL needs a
// secret, and a secret or events without a URL are a mistake worth
// stopping for. events "" means the default.
func ParseWebhookConfig(rawURL, secret, events string) (WebhookConfig, error) {
	if rawURL == "" {
		if secret != "" || strings.TrimSpace(events) != "" {
			return WebhookConfig{}, errors.New("LEASEHOLD_WEBHOOK_SECRET (--webhook-secret) or LEASEHOLD_WEBHOOK_EVENTS (--webhook-events) is set but LEASEHOLD_WEBHOOK_URL (--webhook-url) is not: set the URL, or unset them")
		}
		return WebhookConfig{}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return WebhookConfig{}, fmt.Errorf("LEASEHOLD_WEBHOOK_URL (--webhook-url) %q: want an absolute http:// or https:// URL without credentials or #fragment", rawURL)
	}
	if secret == "" {
		return WebhookConfig{}, errors.New("LEASEHOLD_WEBHOOK_URL (--webhook-url) is set but LEASEHOLD_WEBHOOK_SECRET (--webhook-secret) is not: receivers need it to check the signature")
	}
	if len(secret) < minWebhookSecret {
		return WebhookConfig{}, fmt.Errorf("LEASEHOLD_WEBHOOK_SECRET (--webhook-secret) is %d characters: want at least %d (e.g. openssl rand -hex 32)", len(secret), minWebhookSecret)
	}
	types, err := ParseWebhookEvents(events)
	if err != nil {
		return WebhookConfig{}, err
	}
	return WebhookConfig{URL: rawURL, Secret: secret, Events: types}, nil
}

// ParseWebhookEvents reads a comma-separated list of event types; "" is
// the default (job.dead).
func ParseWebhookEvents(spec string) ([]string, error) {
	if strings.TrimSpace(spec) == "" {
		spec = DefaultWebhookEvents
	}
	var types []string
	for _, item := range strings.Split(spec, ",") {
		t := strings.TrimSpace(item)
		if !slices.Contains(WebhookEventTypes, t) {
			return nil, fmt.Errorf("LEASEHOLD_WEBHOOK_EVENTS (--webhook-events): %q is no event type: want a comma-separated list of %s",
				t, strings.Join(WebhookEventTypes, ", "))
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	return types, nil
}

// ConfigureWebhooks tells every process of the database (direct workers
// included: their transitions write the outbox) which events to record;
// none turns recording off. A server writes it at start, so replicas must
// share one configuration.
func (c *Client) ConfigureWebhooks(ctx context.Context, events []string) error {
	if events == nil {
		events = []string{}
	}
	if err := c.q.WebhookConfigure(ctx, events); err != nil {
		return fmt.Errorf("configuring webhook events: %w", err)
	}
	return nil
}

// WebhookPending is the number of events waiting for delivery.
func (c *Client) WebhookPending(ctx context.Context) (int64, error) {
	n, err := c.q.WebhookPending(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting webhook events: %w", err)
	}
	return n, nil
}
