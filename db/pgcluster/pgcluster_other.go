//go:build !unix

package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// ErrNoPostgres is returned (wrapped) by Start: the private cluster needs
// flock, process groups and unix sockets, which this system lacks.
var ErrNoPostgres = errors.New("the private PostgreSQL cluster needs Linux or macOS: set DATABASE_URL to use an existing database")

// Config says where the cluster would live.
type Config struct {
	Dir       string
	Logger    *slog.Logger
	MustExist bool
}

// ErrNoCluster is never returned here: Start fails with ErrNoPostgres.
var ErrNoCluster = errors.New("there is no private cluster")

// Cluster is never running on this system.
type Cluster struct{}

// Start always fails here, with ErrNoPostgres.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	return nil, fmt.Errorf("starting the private cluster: %w", ErrNoPostgres)
}

// URL is empty: there is no cluster.
func (c *Cluster) URL(dbname string) string { return "" }

// Owned is false: there is no cluster.
func (c *Cluster) Owned() bool { return false }

// Stop does nothing: there is no cluster.
func (c *Cluster) Stop(ctx context.Context) error { return nil }
