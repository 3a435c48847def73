package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasehold/leasehold/migrations"
)

// SchemaVersion is the migration version this build expects: its newest
// embedded migration.
var SchemaVersion = migrations.Latest()

// Migrator applies the embedded migrations.
type Migrator struct {
	m *migrate.Migrate
}

// NewMigrator prepares the embedded migrations against pool's database.
// golang-migrate takes an advisory lock, so replicas starting together
// migrate once.
func NewMigrator(pool *pgxpool.Pool) (*Migrator, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	// The database/sql handle holds pool connections until it is closed,
	// and a pool with connections out never finishes closing.
	sqlDB := stdlib.OpenDBFromPool(pool)
	driver, err := pgxmigrate.WithInstance(sqlDB, &pgxmigrate.Config{})
	if err != nil {
		return nil, fmt.Errorf("opening migration driver: %w", errors.Join(err, sqlDB.Close()))
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return nil, fmt.Errorf("preparing migrations: %w", errors.Join(err, driver.Close()))
	}
	return &Migrator{m: m}, nil
}

// Up applies every migration not yet applied.
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrating up: %w", err)
	}
	return nil
}

// To migrates up or down to version.
func (mg *Migrator) To(version uint) error {
	if err := mg.m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrating to version %d: %w", version, err)
	}
	return nil
}

// Down rolls back one migration.
func (mg *Migrator) Down() error {
	if err := mg.m.Steps(-1); err != nil {
		return fmt.Errorf("migrating down: %w", err)
	}
	return nil
}

// Version reports the applied version; 0 when nothing is applied.
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	v, dirty, err := mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading schema version: %w", err)
	}
	return v, dirty, nil
}

// Close releases the migrator's connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr)
}

// closeSoon closes pool, waiting for it a few seconds at most: when
// golang-migrate's driver fails to open it keeps the connection it took,
// and a pool with a connection out never finishes closing.
func closeSoon(pool *pgxpool.Pool) {
	done := make(chan struct{})
	go func() { pool.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Migrate applies every pending migration to pool's database.
//
// Migrations may rewrite large tables: they run on connections of their
// own without the pool's statement_timeout (PoolConfig.StatementTimeout).
func Migrate(pool *pgxpool.Pool) error {
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	cfg.MinConns, cfg.MaxConns = 0, 2
	unbounded, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return fmt.Errorf("opening a pool for migrations: %w", err)
	}
	defer closeSoon(unbounded)
	mg, err := NewMigrator(unbounded)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.Up()
}
