package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
	"github.com/leasehold/leasehold/db/dbtest"
)

// The field report's first run failed with `database "…" does not exist`
// right after pg_isready passed: the server answered, the database was not
// there yet. Open must wait for the database itself.
func TestOpenWaitsForTheTargetDatabase(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("lh_late_%d", time.Now().UnixNano())
	url := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	exec := func(sql string) error {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), sql)
		return err
	}
	created := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := exec("CREATE DATABASE " + name); err != nil {
			t.Errorf("creating the database: %v", err)
		}
		created <- time.Now()
	}()
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("dropping the database: %v", err)
		}
	})

	pool, err := db.Open(ctx, db.PoolConfig{URL: url, AppName: "leasehold-test"})
	if err != nil {
		t.Fatalf("Open gave up: %v", err)
	}
	defer pool.Close()
	opened := time.Now()
	if at := <-created; opened.Before(at) {
		t.Fatal("Open returned before the database existed")
	}
	var app string
	if err := pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "leasehold-test" {
		t.Fatalf("application_name %q (%v)", app, err)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := db.Open(short, db.PoolConfig{URL: url + "_never"}); err == nil {
		t.Fatal("Open succeeded on a database that never appears")
	}
}
