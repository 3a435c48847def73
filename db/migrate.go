package db

import (
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasehold/leasehold/migrations"
)

// SchemaVersion is the migration version this build expects.
const SchemaVersion = 5

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
	driver, err := pgxmigrate.WithInstance(stdlib.OpenDBFromPool(pool), &pgxmigrate.Config{})
	if err != nil {
		return nil, fmt.Errorf("opening migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return nil, fmt.Errorf("preparing migrations: %w", err)
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

// Migrate applies every pending migration to pool's database.
func Migrate(pool *pgxpool.Pool) error {
	mg, err := NewMigrator(pool)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.Up()
}
