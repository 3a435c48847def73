// Package maintenance runs the background services of a Leasehold
// database: the reaper, the pruner, the scheduler and the webhook sender.
// Each plays a leader role, that one process of the database holds at a
// time; the others stand by and take over when it goes. What they do to
// jobs is queue's: the services call its statements; their loops, timers,
// wake-ups and locks live here.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Service is a background service.
type Service interface {
	// Role is the leader role it plays ("reaper", "pruner", ...).
	Role() string
	// Run works until ctx ends, standing by while another process holds
	// the role. An error means it gave up for good.
	Run(ctx context.Context) error
	// Active reports whether it holds its role now.
	Active() bool
}

// Maintainer runs a list of services together.
type Maintainer struct {
	services []Service
	logger   *slog.Logger
}

// NewMaintainer returns a Maintainer of services.
func NewMaintainer(logger *slog.Logger, services ...Service) *Maintainer {
	if logger == nil {
		logger = slog.Default()
	}
	return &Maintainer{services: services, logger: logger}
}

// Services are the services it runs.
func (m *Maintainer) Services() []Service { return m.services }

// Run starts every service and returns when all have stopped: when ctx
// ends, or when one fails (it is logged and the others are stopped), with
// the errors of those that failed.
func (m *Maintainer) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, len(m.services))
	var wg sync.WaitGroup
	for i, s := range m.services {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				m.logger.Error("background service failed", "role", s.Role(), "err", err)
				errs[i] = fmt.Errorf("%s: %w", s.Role(), err)
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
