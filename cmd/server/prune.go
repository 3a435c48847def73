package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/cmd/internal/cli"
	"github.com/leasehold/leasehold/maintenance"
	"github.com/leasehold/leasehold/queue"
)

// pruneCmd is server prune [--dry-run] [--file-grace D]: one retention pass with the
// server's configuration (jobs, artifact files, audit rows), every
// artifact file looked at, and a report of what went (or would go).
func pruneCmd(args []string) error {
	fs := flag.NewFlagSet("server prune", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: server prune [--dry-run]\n\nflags:\n")
		fs.PrintDefaults()
	}
	dryRun := fs.Bool("dry-run", false, "delete nothing; print what a pass would remove")
	artifacts := fs.String("artifacts", "./.leasehold/artifacts", cli.ArtifactsUsage)
	fileGrace := fs.Duration("file-grace", artifact.DefaultGCGrace, "leave artifact files written within this long (0s: remove any file no row names)")
	retention := maintenance.DefaultRetention()
	fs.Var(&retention, "retention", "how long finished jobs are kept: STATE=DURATION,... (Go durations or Nd), or off")
	auditRetention := maintenance.AuditRetention(audit.DefaultRetention)
	fs.Var(&auditRetention, "audit-retention", "how long the audit trail keeps a row: a Go duration or Nd, or off")
	if err := cli.ParseFlags(fs, args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("server prune: unexpected argument %q", fs.Arg(0))
	}
	if *fileGrace < 0 {
		return fmt.Errorf("--file-grace %v: want 0s or more", *fileGrace)
	}
	return withDatabase("prune", func(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
		store, err := cli.OpenArtifacts(ctx, *artifacts, queue.NewClient(pool, nil))
		if err != nil {
			return err
		}
		store.SetGCGrace(*fileGrace)
		p := maintenance.NewPruner(pool, maintenance.PrunerConfig{Retention: retention,
			AuditRetention: time.Duration(auditRetention), Files: store})
		res, err := p.Prune(ctx, maintenance.PruneOptions{DryRun: *dryRun, Sweep: true})
		printPrune(out, retention, auditRetention, res, *dryRun)
		return err
	})
}

func printPrune(w io.Writer, r maintenance.Retention, ar maintenance.AuditRetention, res maintenance.PruneResult, dryRun bool) {
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "retention %s\n", r)
	fmt.Fprintf(w, "audit retention %s\n", ar)
	for _, st := range maintenance.FinishedStates {
		fmt.Fprintf(w, "%s %d %s jobs\n", verb, res.Jobs[st], st)
	}
	fmt.Fprintf(w, "%s %d artifact files, %d bytes\n", verb, res.Files, res.Bytes)
	fmt.Fprintf(w, "%s %d audit rows\n", verb, res.Audit)
}
