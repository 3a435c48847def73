package main

import (
	"context"
	"fmt"
)

// limitedModes are the drains of -limits, in the order each run makes
// them: the same n jobs free, in a queue capped at maxRunning, spread
// over keys concurrency keys of limit 1, each naming one rate-limit key
// whose budget (10^9/min) never binds, and both (one job per phone under
// a rate limit; ratedOnly: only uncapped and rate-limited).
func (b *bench) limitedModes(maxRunning, keys int, ratedOnly bool) []limitedMode {
	rated := limitedMode{name: "rate-limited (1 key, 1e9/min)", rated: true}
	if ratedOnly {
		return []limitedMode{{name: "uncapped"}, rated}
	}
	return []limitedMode{
		{name: "uncapped"},
		{name: fmt.Sprintf("capped (max_running %d)", maxRunning), maxRunning: maxRunning},
		{name: fmt.Sprintf("keyed (%d keys, limit 1)", keys), keys: keys},
		rated,
		{name: fmt.Sprintf("keyed and rate-limited (%d keys)", keys), keys: keys, rated: true},
	}
}

type limitedMode struct {
	name       string
	maxRunning int
	keys       int
	rated      bool
}

// limits drains n jobs through Leasehold in each limited mode, runs
// times, alternating, and prints each mode's median figures and its
// ratio to the uncapped drain of the same run (the machine's load changes
// between runs; within one run the modes follow each other closely).
func (b *bench) limits(ctx context.Context, n, runs, maxRunning, keys int, ratedOnly bool) error {
	modes := b.limitedModes(maxRunning, keys, ratedOnly)
	results := make([][]result, len(modes))
	for i := range runs {
		for m, mode := range modes {
			b.maxRunning, b.keys, b.rated = mode.maxRunning, mode.keys, mode.rated
			r, err := b.runLeasehold(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", mode.name, err)
			}
			fmt.Printf("run %d %-26s %8.0f jobs/s  %6.3f commits  %6.2f row writes  %6.1f buffer touches per job  (%.2fs%s)\n",
				i+1, mode.name, r.rate(), r.per(r.work.commits), r.per(r.work.writes), r.per(r.work.touches),
				r.elapsed.Seconds(), pollNote(r))
			results[m] = append(results[m], r)
		}
	}
	b.maxRunning, b.keys, b.rated = 0, 0, false

	fmt.Printf("\n%d no-op jobs, one worker (--concurrency 200), median of %d runs; ratio: median of each run's mode/uncapped\n\n", n, runs)
	fmt.Println("| drain | jobs/s | / uncapped | commits per job | row writes per job | buffer touches per job |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	for m, mode := range modes {
		rate, _ := median(results[m], result.rate)
		ratios := make([]float64, runs)
		for i := range runs {
			ratios[i] = results[m][i].rate() / results[0][i].rate()
		}
		ratio := medianOf(ratios)
		commits, _ := median(results[m], func(r result) float64 { return r.per(r.work.commits) })
		writes, _ := median(results[m], func(r result) float64 { return r.per(r.work.writes) })
		touches, _ := median(results[m], func(r result) float64 { return r.per(r.work.touches) })
		fmt.Printf("| %s | %.0f | %.2f | %.3f | %.2f | %.1f |\n", mode.name, rate, ratio, commits, writes, touches)
	}
	return nil
}
