package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/cmd/internal/cli"
)

// artifactsCmd is server artifacts migrate --to URL: every artifact
// object of --artifacts copied to another storage, each verified by its
// hash; run again after a stop, it skips what is there already.
func artifactsCmd(args []string) error {
	if len(args) == 0 || args[0] != "migrate" {
		return errors.New("usage: server artifacts migrate --to s3://bucket/prefix [--artifacts DIR]")
	}
	fs := flag.NewFlagSet("server artifacts migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: server artifacts migrate --to URL [--artifacts FROM]\n\nflags:\n")
		fs.PrintDefaults()
	}
	from := fs.String("artifacts", "./.leasehold/artifacts", "the storage to copy from: "+cli.ArtifactsUsage)
	to := fs.String("to", "", "the storage to copy to (s3://bucket/prefix or a directory)")
	concurrency := fs.Int("concurrency", 8, "objects copied at once (1 to 64)")
	if err := cli.ParseFlags(fs, args[1:]); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("server artifacts migrate: unexpected argument %q", fs.Arg(0))
	case *to == "":
		return errors.New("server artifacts migrate: --to is required")
	case *to == *from:
		return errors.New("server artifacts migrate: --to names the storage it copies from")
	case *concurrency < 1 || *concurrency > 64:
		return fmt.Errorf("--concurrency %d: want 1 to 64", *concurrency)
	}
	logger := cli.NewLogger("text", slog.LevelInfo)
	ctx, stop := cli.SignalContext(logger)
	defer stop()
	src, err := artifact.OpenBackend(ctx, *from, os.Getenv)
	if err != nil {
		return fmt.Errorf("opening %s: %w", *from, err)
	}
	dst, err := artifact.OpenBackend(ctx, *to, os.Getenv)
	if err != nil {
		return fmt.Errorf("opening %s: %w", *to, err)
	}
	res, err := artifact.Migrate(ctx, src, dst, artifact.MigrateOptions{
		Concurrency: *concurrency,
		Progress: func(r artifact.MigrateResult) {
			if n := r.Copied + r.Skipped; n%1000 == 0 {
				printMigrate(os.Stderr, r)
			}
		},
	})
	printMigrate(os.Stdout, res)
	return err
}

func printMigrate(w io.Writer, r artifact.MigrateResult) {
	fmt.Fprintf(w, "copied %d objects (%d bytes), each read back and verified; skipped %d already there\n", r.Copied, r.Bytes, r.Skipped)
}
